package rpc

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/queue/canonjson"
)

// Strict decoding of request params (serde's deny_unknown_fields, protocol
// §2.2, §2.4). encoding/json's DisallowUnknownFields is not enough: it
// matches keys case-insensitively, accepts repeated keys and does not say
// which fields were expected, so the JSON is first walked against the target
// type and only then decoded by encoding/json.

// decodeStrict decodes the JSON object data into v, which must be a non-nil
// pointer to a struct, rejecting any member whose key is not exactly (case
// included) the JSON name of a field, and any repeated member, in v's struct
// and every struct nested in it. Values of type json.RawMessage, of types
// with their own UnmarshalJSON or UnmarshalText, of type json.Number and of
// interface type are not checked (they are decoded by those methods or kept
// as they are). JSON null reads as absent. Required fields are not
// enforced: callers check them.
//
// Every failure caused by data is a *queue.InvalidError whose message starts
// "invalid <what> params: ":
//
//   - null or empty data: "missing params";
//   - an unknown member: "unknown field `surprise`, expected one of `max`,
//     `owner_id`, `workflow_ids`, `exclude`" (serde's wording, listing the
//     JSON names of the struct that lacked it in declaration order), with
//     " at `path`" appended when that struct is nested;
//   - a repeated member: "duplicate field `max`";
//   - a value of the wrong JSON type or out of range, e.g. "invalid value:
//     integer `-1`, expected u64 at `max`" or "invalid type: floating point
//     `1.5`, expected u64 at `max`";
//   - malformed JSON, invalid UTF-8 or an unpaired surrogate escape;
//   - the message of an error returned by a field's UnmarshalJSON.
//
// A v that is not a non-nil pointer to a struct is a programming error,
// reported as a plain error.
func decodeStrict(data []byte, v any, what string) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("rpc: decodeStrict needs a non-nil pointer to a struct, got %T", v)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return invalidParams("invalid %s params: missing params", what)
	}
	if !json.Valid(data) {
		var x any
		err := json.Unmarshal(data, &x) // only for its description of the fault
		return invalidParams("invalid %s params: malformed JSON: %s", what, queue.JSONErrorText(err))
	}
	if err := canonjson.CheckText(data); err != nil {
		return invalidParams("invalid %s params: %v", what, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := (strictWalker{dec}).value(rv.Elem().Type(), ""); err != nil {
		return invalidParams("invalid %s params: %v", what, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		var inv *queue.InvalidError
		if errors.As(err, &inv) {
			return invalidParams("invalid %s params: %s", what, inv.Msg)
		}
		return invalidParams("invalid %s params: %s", what, queue.JSONErrorText(err))
	}
	return nil
}

// strictWalker checks a syntactically valid JSON text against a Go type.
type strictWalker struct{ dec *json.Decoder }

// notStrict reports whether values of type t are left to their own decoding.
func notStrict(t reflect.Type) bool {
	if t.Kind() == reflect.Interface || t == reflect.TypeFor[json.Number]() {
		return true // json.Number takes a number or a numeric string
	}
	jsonU, textU := reflect.TypeFor[json.Unmarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()
	for _, u := range []reflect.Type{t, reflect.PointerTo(t)} {
		if u.Implements(jsonU) || u.Implements(textU) {
			return true
		}
	}
	return false
}

// value consumes one JSON value and checks it against t; path locates it
// for error messages.
func (w strictWalker) value(t reflect.Type, path string) error {
	for {
		if notStrict(t) {
			return w.skip()
		}
		if t.Kind() != reflect.Pointer {
			break
		}
		t = t.Elem()
	}
	tok, err := w.dec.Token()
	if err != nil {
		return errors.New(queue.JSONErrorText(err))
	}
	if tok == nil {
		return nil // null reads as absent
	}
	delim, isDelim := tok.(json.Delim)
	switch t.Kind() {
	case reflect.Struct:
		if !isDelim || delim != '{' {
			return typeError(tok, "an object", path)
		}
		return w.object(t, path)
	case reflect.Map:
		if !isDelim || delim != '{' {
			return typeError(tok, "a map", path)
		}
		for w.dec.More() {
			key, err := w.dec.Token()
			if err != nil {
				return errors.New(queue.JSONErrorText(err))
			}
			k, _ := key.(string)
			if err := w.value(t.Elem(), joinPath(path, k)); err != nil {
				return err
			}
		}
		return w.closing()
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 && !notStrict(t.Elem()) {
			if _, ok := tok.(string); !ok { // []byte is base64 text in encoding/json
				return typeError(tok, "a base64 string", path)
			}
			return nil
		}
		if !isDelim || delim != '[' {
			return typeError(tok, "a sequence", path)
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		return w.closing()
	case reflect.String:
		if _, ok := tok.(string); !ok {
			return typeError(tok, "a string", path)
		}
		return nil
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return typeError(tok, "a boolean", path)
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		want := "i" + strconv.Itoa(t.Bits())
		n, ok := tok.(json.Number)
		if !ok || !isIntegerText(string(n)) {
			return typeError(tok, want, path)
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return fmt.Errorf("invalid value: integer `%s`, expected %s%s", n, want, at(path))
		}
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		want := "u" + strconv.Itoa(t.Bits())
		n, ok := tok.(json.Number)
		if !ok || !isIntegerText(string(n)) {
			return typeError(tok, want, path)
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			return fmt.Errorf("invalid value: integer `%s`, expected %s%s", n, want, at(path))
		}
		return nil
	case reflect.Float32, reflect.Float64:
		want := "f" + strconv.Itoa(t.Bits())
		n, ok := tok.(json.Number)
		if !ok {
			return typeError(tok, want, path)
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			return fmt.Errorf("invalid value: number `%s` is out of range for %s%s", n, want, at(path))
		}
		return nil
	}
	return fmt.Errorf("cannot decode into a field of Go type %s%s", t, at(path))
}

// object checks the members of an object (its '{' already consumed) against
// the fields of struct type t.
func (w strictWalker) object(t reflect.Type, path string) error {
	fields := strictFields(t)
	seen := make(map[string]bool, len(fields))
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return errors.New(queue.JSONErrorText(err))
		}
		key, _ := tok.(string)
		f, ok := findField(fields, key)
		if !ok {
			return unknownField(key, fields, path)
		}
		if seen[key] {
			return fmt.Errorf("duplicate field `%s`%s", key, at(path))
		}
		seen[key] = true
		if f.quoted { // ",string": a number or bool inside a string; encoding/json checks it
			err = w.skip()
		} else {
			err = w.value(f.typ, joinPath(path, key))
		}
		if err != nil {
			return err
		}
	}
	return w.closing()
}

// skip consumes one JSON value without checking it.
func (w strictWalker) skip() error {
	var raw json.RawMessage
	if err := w.dec.Decode(&raw); err != nil {
		return errors.New(queue.JSONErrorText(err))
	}
	return nil
}

// closing consumes the '}' or ']' that ends the current object or array.
func (w strictWalker) closing() error {
	if _, err := w.dec.Token(); err != nil {
		return errors.New(queue.JSONErrorText(err))
	}
	return nil
}

// strictField is a struct field as encoding/json names it.
type strictField struct {
	name   string
	typ    reflect.Type
	quoted bool
}

// strictFields lists the JSON fields of struct type t in declaration order,
// with the fields of untagged embedded structs in place, as encoding/json
// sees them (its dominance rules for clashing promoted names are not
// modelled: the first field of a name wins).
func strictFields(t reflect.Type) []strictField {
	var out []strictField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, strictFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		quoted := false
		for _, o := range strings.Split(opts, ",") {
			quoted = quoted || o == "string"
		}
		out = append(out, strictField{name: name, typ: f.Type, quoted: quoted})
	}
	return out
}

func findField(fields []strictField, key string) (strictField, bool) {
	for _, f := range fields {
		if f.name == key {
			return f, true
		}
	}
	return strictField{}, false
}

// unknownField words the error as serde does (serde::de::Error::unknown_field
// with its OneOf list).
func unknownField(key string, fields []strictField, path string) error {
	var expected string
	switch len(fields) {
	case 0:
		return fmt.Errorf("unknown field `%s`, there are no fields%s", key, at(path))
	case 1:
		expected = "`" + fields[0].name + "`"
	case 2:
		expected = "`" + fields[0].name + "` or `" + fields[1].name + "`"
	default:
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = "`" + f.name + "`"
		}
		expected = "one of " + strings.Join(names, ", ")
	}
	return fmt.Errorf("unknown field `%s`, expected %s%s", key, expected, at(path))
}

// typeError words a JSON value of the wrong kind as serde does: "invalid
// type: string \"x\", expected u64".
func typeError(tok json.Token, want, path string) error {
	var got string
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			got = "map"
		} else {
			got = "sequence"
		}
	case string:
		got = "string " + strconv.Quote(v)
	case bool:
		got = "boolean `" + strconv.FormatBool(v) + "`"
	case json.Number:
		if isIntegerText(string(v)) {
			got = "integer `" + string(v) + "`"
		} else {
			got = "floating point `" + string(v) + "`"
		}
	default:
		got = "null"
	}
	return fmt.Errorf("invalid type: %s, expected %s%s", got, want, at(path))
}

// isIntegerText reports whether a JSON number literal has neither fraction
// nor exponent.
func isIntegerText(lit string) bool {
	return !strings.ContainsAny(lit, ".eE")
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// at is the location suffix of an error message; empty at the top level so
// top-level messages read exactly like serde's.
func at(path string) string {
	if path == "" {
		return ""
	}
	return " at `" + path + "`"
}

// invalidParams is the *queue.InvalidError for a request's params.
func invalidParams(format string, args ...any) error {
	return &queue.InvalidError{Msg: fmt.Sprintf(format, args...)}
}
