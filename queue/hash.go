package queue

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/gitlease/gitlease/queue/canonjson"
)

// The request hash (protocol/queue-v2.md §3.3) must equal the reference's
// byte for byte, so CanonicalJSON reproduces what the reference does: parse
// into a serde_json::Value with serde_json's default features (no
// float_roundtrip, no arbitrary_precision) and print it with object keys
// sorted. Go's encoding/json differs in string escaping and number handling,
// hence package canonjson.

// RequestHash returns the lowercase hex SHA-256 of the canonical JSON of
// {"dispatch":D,"repository":R,"run_at":S,"expire_after_secs":N}: D is d
// encoded as on the wire (SubjectRef in its §2.1 form) without requested_at,
// so that a retry stamped with a new time still matches; R is r, or null; S
// is *runAt exactly as sent, or null; N is *expireAfterSecs, or null.
//
// r is hashed as given: pass the trimmed reservation that will be stored.
// A dispatch input of null counts as absent, as it does for the reference.
//
// It returns an *InvalidError when d holds JSON the reference could not have
// accepted (see CanonicalJSON), and a plain error when d cannot be encoded.
func RequestHash(d SubjectDispatch, r *Reservation, runAt *string, expireAfterSecs *uint64) (string, error) {
	if canon, ok := canonicalRequest(d, r, runAt, expireAfterSecs); ok {
		sum := sha256.Sum256(canon)
		return hex.EncodeToString(sum[:]), nil
	}
	return requestHashSlow(d, r, runAt, expireAfterSecs)
}

// requestHashSlow is RequestHash by way of the wire form: encode the
// dispatch, decode it into a map, encode and canonicalise the content. It
// is the definition canonicalRequest must agree with.
func requestHashSlow(d SubjectDispatch, r *Reservation, runAt *string, expireAfterSecs *uint64) (string, error) {
	d.RequestedAt = Timestamp{} // left out below; zeroed so it cannot fail to encode
	raw, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	// Decoding below would turn a bad surrogate in input or metadata into
	// U+FFFD; catch it while the text is still as sent.
	if err := canonjson.CheckText(raw); err != nil {
		return "", invalidf("invalid JSON: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var dispatch map[string]any
	if err := dec.Decode(&dispatch); err != nil {
		return "", err
	}
	delete(dispatch, "requested_at")
	if v, ok := dispatch["input"]; ok && v == nil {
		delete(dispatch, "input")
	}
	content := map[string]any{
		"dispatch":          dispatch,
		"repository":        nil,
		"run_at":            nil,
		"expire_after_secs": nil,
	}
	if r != nil {
		content["repository"] = r
	}
	if runAt != nil {
		content["run_at"] = *runAt
	}
	if expireAfterSecs != nil {
		content["expire_after_secs"] = *expireAfterSecs
	}
	raw, err = json.Marshal(content)
	if err != nil {
		return "", err
	}
	canon, err := CanonicalJSON(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// canonicalRequest writes the canonical JSON RequestHash hashes straight
// from the Go values, without the encode-decode-encode detour (which cost a
// fifth of serve's CPU per delivery with a 20 KB description). It covers
// the common shape, a flat-form subject with no input, vars or actor, all
// text valid UTF-8, and reports false for anything else, which
// requestHashSlow then hashes. Keys are written in bytewise order.
func canonicalRequest(d SubjectDispatch, r *Reservation, runAt *string, expireAfterSecs *uint64) ([]byte, bool) {
	sub := d.Subject
	if sub == nil || len(d.Input) != 0 || len(d.Vars) != 0 || d.Actor != nil ||
		asciiEqualFold(sub.Kind, KindTask) || asciiEqualFold(sub.Kind, KindRequirement) || asciiEqualFold(sub.Kind, KindCustom) {
		return nil, false
	}
	texts := []string{d.WorkflowRef, d.Priority, d.TriggerSource, sub.Kind, sub.ID, sub.Title, sub.Description}
	texts = append(texts, sub.Labels...)
	if r != nil {
		texts = append(texts, r.Repository, r.BaseRef, r.HeadRef)
	}
	if runAt != nil {
		texts = append(texts, *runAt)
	}
	size := 256
	for _, t := range texts {
		if !utf8.ValidString(t) {
			return nil, false
		}
		size += len(t) + 8
	}
	var meta []byte
	if !metadataEmpty(sub.Metadata) {
		var err error
		if meta, err = CanonicalJSON(sub.Metadata); err != nil {
			return nil, false
		}
		size += len(meta)
	}
	var b bytes.Buffer
	b.Grow(size)
	// first is whether the object being written has no member yet.
	first := false
	open := func() { b.WriteByte('{'); first = true }
	end := func() { b.WriteByte('}'); first = false }
	key := func(name string) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteByte('"')
		b.WriteString(name)
		b.WriteString(`":`)
	}
	str := func(name, v string, omitEmpty bool) {
		if !omitEmpty || v != "" {
			key(name)
			canonjson.WriteString(&b, v)
		}
	}
	open()
	key("dispatch")
	open()
	str("priority", d.Priority, true)
	key("subject")
	open()
	str("description", sub.Description, true)
	str("id", sub.ID, false)
	str("kind", sub.Kind, false)
	if len(sub.Labels) > 0 {
		key("labels")
		b.WriteByte('[')
		for i, l := range sub.Labels {
			if i > 0 {
				b.WriteByte(',')
			}
			canonjson.WriteString(&b, l)
		}
		b.WriteByte(']')
	}
	if meta != nil {
		key("metadata")
		b.Write(meta)
	}
	str("title", sub.Title, true)
	end()
	str("trigger_source", d.TriggerSource, false)
	str("workflow_ref", d.WorkflowRef, false)
	end()
	key("expire_after_secs")
	if expireAfterSecs != nil {
		b.WriteString(strconv.FormatUint(*expireAfterSecs, 10))
	} else {
		b.WriteString("null")
	}
	key("repository")
	if r != nil {
		open()
		str("base_ref", r.BaseRef, false)
		str("head_ref", r.HeadRef, false)
		str("repository", r.Repository, false)
		end()
	} else {
		b.WriteString("null")
	}
	key("run_at")
	if runAt != nil {
		canonjson.WriteString(&b, *runAt)
	} else {
		b.WriteString("null")
	}
	end()
	return b.Bytes(), true
}

// CanonicalJSON re-encodes the JSON text v as the reference prints it
// (see package canonjson for exactly how). It returns an *InvalidError when
// v is not a single valid JSON value or is one serde_json rejects.
func CanonicalJSON(v []byte) ([]byte, error) {
	out, err := canonjson.Canonical(v)
	var se *canonjson.SyntaxError
	if errors.As(err, &se) {
		return nil, invalidf("%s", se.Msg)
	}
	return out, err
}
