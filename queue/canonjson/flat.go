package canonjson

import (
	"bytes"
	"io"
	"sort"

	"github.com/go-json-experiment/json/jsontext"
)

// canonicalFlat is Canonical for the common shape, an object of strings,
// numbers, booleans and nulls without a repeated name (a queue item's
// metadata), read in one pass of the single-pass decoder, without the
// general path's encoding/json decode into a map.
// It reports false for anything else, valid or not, which the general path
// then answers. FuzzCanonicalFlat holds the two equal.
func canonicalFlat(v []byte) ([]byte, bool) {
	type member struct {
		name, value string
		kind        jsontext.Kind
	}
	dec := jsontext.NewDecoder(bytes.NewReader(v)) // rejects invalid UTF-8 and repeated names
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, false
	}
	var members []member
	size := 2
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, false
		}
		m := member{name: name.String()}
		val, err := dec.ReadToken()
		if err != nil {
			return nil, false
		}
		switch m.kind = val.Kind(); m.kind {
		case '"', 't', 'f', 'n':
			m.value = val.String()
		case '0':
			if m.value, err = canonicalNumber(val.String()); err != nil {
				return nil, false
			}
		default: // an array or an object
			return nil, false
		}
		members = append(members, m)
		size += len(m.name) + len(m.value) + 8
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return nil, false
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, false
	}
	sort.Slice(members, func(i, j int) bool { return members[i].name < members[j].name })
	var b bytes.Buffer
	b.Grow(size)
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		WriteString(&b, m.name)
		b.WriteByte(':')
		if m.kind == '"' {
			WriteString(&b, m.value)
		} else {
			b.WriteString(m.value)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), true
}
