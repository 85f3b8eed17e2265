package queue

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/gitlease/gitlease/queue/canonjson"
)

// encodeDispatch returns the dispatch as stored (it goes into a jsonb
// column, so only its JSON value matters, not its spelling). For the common
// shape, a flat-form subject with no input, vars or actor and valid UTF-8
// text, it writes the JSON in one pass: json.Marshal of a SubjectRef encodes
// the 20 KB description once inside MarshalJSON and then scans and compacts
// it again. Anything else goes through json.Marshal.
func encodeDispatch(d SubjectDispatch) ([]byte, error) {
	if b, ok := encodeDispatchFast(d); ok {
		return b, nil
	}
	return json.Marshal(d)
}

func encodeDispatchFast(d SubjectDispatch) ([]byte, bool) {
	sub := d.Subject
	if sub == nil || len(d.Input) != 0 || len(d.Vars) != 0 || d.Actor != nil ||
		asciiEqualFold(sub.Kind, KindTask) || asciiEqualFold(sub.Kind, KindRequirement) || asciiEqualFold(sub.Kind, KindCustom) {
		return nil, false
	}
	size := 256 + len(sub.Description) + len(sub.Title) + len(sub.Metadata)
	for _, t := range append([]string{d.WorkflowRef, d.Priority, d.TriggerSource, sub.Kind, sub.ID, sub.Title, sub.Description}, sub.Labels...) {
		if !utf8.ValidString(t) {
			return nil, false
		}
	}
	at, err := d.RequestedAt.MarshalJSON()
	if err != nil {
		return nil, false
	}
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(`{"subject":{"kind":`)
	canonjson.WriteString(&b, sub.Kind)
	b.WriteString(`,"id":`)
	canonjson.WriteString(&b, sub.ID)
	if sub.Title != "" {
		b.WriteString(`,"title":`)
		canonjson.WriteString(&b, sub.Title)
	}
	if sub.Description != "" {
		b.WriteString(`,"description":`)
		canonjson.WriteString(&b, sub.Description)
	}
	if len(sub.Labels) > 0 {
		b.WriteString(`,"labels":[`)
		for i, l := range sub.Labels {
			if i > 0 {
				b.WriteByte(',')
			}
			canonjson.WriteString(&b, l)
		}
		b.WriteByte(']')
	}
	if !metadataEmpty(sub.Metadata) {
		b.WriteString(`,"metadata":`)
		if json.Compact(&b, sub.Metadata) != nil {
			return nil, false
		}
	}
	b.WriteString(`},"workflow_ref":`)
	canonjson.WriteString(&b, d.WorkflowRef)
	if d.Priority != "" {
		b.WriteString(`,"priority":`)
		canonjson.WriteString(&b, d.Priority)
	}
	b.WriteString(`,"trigger_source":`)
	canonjson.WriteString(&b, d.TriggerSource)
	b.WriteString(`,"requested_at":`)
	b.Write(at)
	b.WriteByte('}')
	return b.Bytes(), true
}
