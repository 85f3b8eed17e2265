package queue

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// Subject kinds with a tagged legacy wire form (protocol/queue-v2.md §2.1).
const (
	KindTask        = "animus.task"
	KindRequirement = "animus.requirement"
	KindCustom      = "custom"
)

// taggedCustom is the body of the tagged Custom form; both members are always
// written.
type taggedCustom struct {
	Title       string `json:"title"`
	Description string `json:"description"`
}

// flatSubject is the flat wire form, fields in the reference's order.
type flatSubject struct {
	Kind        string          `json:"kind"`
	ID          string          `json:"id"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Labels      []string        `json:"labels,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// MarshalJSON writes r in the tagged form when r.Labels is empty, r.Metadata
// is absent, null or {} and r.Kind is (ASCII case-insensitively) animus.task,
// animus.requirement or custom; otherwise in the flat form. The tagged forms
// are {"Task":{"id":ID}}, {"Requirement":{"id":ID}} (title and description
// are dropped) and {"Custom":{"title":T,"description":D}} with T = r.Title,
// else r.ID, and D = r.Description. The flat form lists kind and id, then
// title, description, labels and metadata when non-empty.
//
// It fails only when r.Metadata is not valid JSON.
func (r SubjectRef) MarshalJSON() ([]byte, error) {
	metaEmpty := metadataEmpty(r.Metadata)
	if len(r.Labels) == 0 && metaEmpty {
		switch {
		case asciiEqualFold(r.Kind, KindTask):
			return marshalTagged("Task", r.ID)
		case asciiEqualFold(r.Kind, KindRequirement):
			return marshalTagged("Requirement", r.ID)
		case asciiEqualFold(r.Kind, KindCustom):
			c := taggedCustom{Title: r.Title, Description: r.Description}
			if c.Title == "" {
				c.Title = r.ID
			}
			return json.Marshal(map[string]taggedCustom{"Custom": c})
		}
	}
	f := flatSubject{Kind: r.Kind, ID: r.ID, Title: r.Title, Description: r.Description, Labels: r.Labels}
	if !metaEmpty {
		f.Metadata = r.Metadata
	}
	return json.Marshal(f)
}

func marshalTagged(tag, id string) ([]byte, error) {
	return json.Marshal(map[string]struct {
		ID string `json:"id"`
	}{tag: {ID: id}})
}

// UnmarshalJSON reads either wire form of §2.1, trying the tagged form first
// as the reference's untagged enum does: an object with exactly one member
// named Task, Requirement or Custom (names and member keys are
// case-sensitive) whose value is an object with a string id (Task,
// Requirement) or string title and description (Custom). {"Task":{"id":X}}
// becomes kind animus.task, {"Requirement":{"id":X}} kind animus.requirement
// and {"Custom":{"title":T,"description":D}} kind custom with id and title T
// and description D.
//
// Anything else is read in the flat form: kind and id are required strings;
// title, description (strings), labels (array of strings) and metadata (any
// JSON) are optional, null reads as absent, and a null or {} metadata is
// stored as nil. Unknown members are ignored in both forms. JSON null leaves
// r unchanged.
//
// It returns an *InvalidError when data matches neither form.
func (r *SubjectRef) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		return nil
	}
	members, err := objectMembers(data)
	if err != nil {
		return invalidf("invalid subject: %v", err)
	}
	if len(members) == 1 {
		if v, ok := decodeTagged(members[0]); ok {
			*r = v
			return nil
		}
	}
	v, err := decodeFlat(members)
	if err != nil {
		return invalidf("invalid subject: %v (expected {\"Task\":{\"id\":…}}, {\"Requirement\":{\"id\":…}}, "+
			"{\"Custom\":{\"title\":…,\"description\":…}} or {\"kind\":…,\"id\":…})", err)
	}
	*r = v
	return nil
}

// member is one "key": value pair of a JSON object, in document order.
type member struct {
	key   string
	value json.RawMessage
}

// objectMembers lists the members of the JSON object data in order, keeping
// duplicates, so that callers can match keys exactly (encoding/json matches
// struct fields case-insensitively, serde does not).
func objectMembers(data []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, errors.New(JSONErrorText(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("expected an object, got " + describeJSON(data))
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errors.New(JSONErrorText(err))
		}
		key, _ := tok.(string) // the decoder guarantees object keys are strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errors.New(JSONErrorText(err))
		}
		out = append(out, member{key: key, value: raw})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, errors.New(JSONErrorText(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the object")
	}
	return out, nil
}

// decodeTagged reads a one-member object in the tagged form.
func decodeTagged(m member) (SubjectRef, bool) {
	fields, err := objectMembers(m.value)
	if err != nil {
		return SubjectRef{}, false
	}
	switch m.key {
	case "Task", "Requirement":
		id, ok := requiredString(fields, "id")
		if !ok {
			return SubjectRef{}, false
		}
		kind := KindTask
		if m.key == "Requirement" {
			kind = KindRequirement
		}
		return SubjectRef{Kind: kind, ID: id}, true
	case "Custom":
		title, ok1 := requiredString(fields, "title")
		desc, ok2 := requiredString(fields, "description")
		if !ok1 || !ok2 {
			return SubjectRef{}, false
		}
		return SubjectRef{Kind: KindCustom, ID: title, Title: title, Description: desc}, true
	}
	return SubjectRef{}, false
}

// requiredString returns the string value of the single member named key.
// A missing, repeated or non-string member fails, as serde's derived
// Deserialize does.
func requiredString(fields []member, key string) (string, bool) {
	var (
		s     string
		found bool
	)
	for _, f := range fields {
		if f.key != key {
			continue
		}
		if found || len(f.value) == 0 || f.value[0] != '"' {
			return "", false
		}
		if err := json.Unmarshal(f.value, &s); err != nil {
			return "", false
		}
		found = true
	}
	return s, found
}

// decodeFlat reads the flat form from an object's members.
func decodeFlat(members []member) (SubjectRef, error) {
	var (
		r    SubjectRef
		seen = map[string]bool{}
	)
	for _, m := range members {
		var dst any
		switch m.key {
		case "kind":
			dst = &r.Kind
		case "id":
			dst = &r.ID
		case "title":
			dst = &r.Title
		case "description":
			dst = &r.Description
		case "labels":
			dst = &r.Labels
		case "metadata":
			if !metadataEmpty(m.value) {
				r.Metadata = append(json.RawMessage(nil), m.value...)
			}
		default:
			continue // not strict: unknown members are dropped
		}
		if seen[m.key] {
			return SubjectRef{}, errors.New("duplicate field `" + m.key + "`")
		}
		seen[m.key] = true
		if dst == nil {
			continue
		}
		null := string(m.value) == "null"
		if null && (m.key == "kind" || m.key == "id") {
			return SubjectRef{}, errors.New("field `" + m.key + "` must be a string, got null")
		}
		if null {
			continue
		}
		if err := json.Unmarshal(m.value, dst); err != nil {
			return SubjectRef{}, errors.New("field `" + m.key + "`: " + JSONErrorText(err))
		}
	}
	for _, k := range []string{"kind", "id"} {
		if !seen[k] {
			return SubjectRef{}, errors.New("missing field `" + k + "`")
		}
	}
	return r, nil
}

// metadataEmpty reports whether raw metadata is absent, null or an empty
// object; the reference treats all three as its default {} and omits them.
func metadataEmpty(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return true
	}
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return false
	}
	return len(bytes.TrimSpace(raw[1:len(raw)-1])) == 0
}

// CanonicalID returns the canonical qualified id "<kind>:<native>" of a
// subject (§2.1): kind animus.task becomes task and animus.requirement
// becomes requirement (exact matches), kind and id are trimmed, and one
// leading "<kind>:" is dropped from the id, ASCII case-insensitively, so that
// ids are never prefixed twice.
//
// It returns an *InvalidError "queue subject identity is missing" when the
// kind or the native id is empty.
func CanonicalID(kind, id string) (string, error) {
	switch kind {
	case KindTask:
		kind = "task"
	case KindRequirement:
		kind = "requirement"
	}
	kind = strings.TrimSpace(kind)
	id = strings.TrimSpace(id)
	if kind == "" || id == "" {
		return "", invalidf("queue subject identity is missing")
	}
	native := id
	if prefix := kind + ":"; len(id) >= len(prefix) && asciiEqualFold(id[:len(prefix)], prefix) {
		native = id[len(prefix):]
	}
	if native == "" {
		return "", invalidf("queue subject identity is missing")
	}
	return kind + ":" + native, nil
}

// asciiEqualFold is strings.EqualFold restricted to ASCII letters, as Rust's
// eq_ignore_ascii_case is: "K" (Kelvin sign) does not match "k".
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// legacyKey returns the legacy subject key (§2.1) used by legacy entries'
// subject_id and by exclude_subjects: the bare id when kind is exactly
// animus.task, animus.requirement, custom, task or requirement, else
// "<kind>::<id>". Nothing is trimmed.
func legacyKey(kind, id string) string {
	switch kind {
	case KindTask, KindRequirement, KindCustom, "task", "requirement":
		return id
	}
	return kind + "::" + id
}

// TaskID returns the raw id when kind is animus.task or task (ASCII
// case-insensitively), else "".
func TaskID(kind, id string) string {
	if asciiEqualFold(kind, KindTask) || asciiEqualFold(kind, "task") {
		return id
	}
	return ""
}

// SplitQualifiedID splits a qualified id at its first ':' into kind and
// native id. ok is false when there is no ':' or either part is blank
// (empty or only white space); the parts are returned untrimmed.
func SplitQualifiedID(q string) (kind, native string, ok bool) {
	kind, native, found := strings.Cut(q, ":")
	if !found || strings.TrimSpace(kind) == "" || strings.TrimSpace(native) == "" {
		return "", "", false
	}
	return kind, native, true
}
