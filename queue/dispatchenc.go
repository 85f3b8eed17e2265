package queue

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/gitlease/gitlease/queue/canonjson"
)

// encodeEnqueue returns the dispatch as stored (it goes into a jsonb
// column, so only its JSON value matters, not its spelling) and the
// request hash (RequestHash). For the common shape it writes both in one
// pass (encodeFast); anything else goes through json.Marshal and the
// wire-form hash.
func encodeEnqueue(d SubjectDispatch, r *Reservation, runAt *string, expireAfterSecs *uint64) (dispatch []byte, hash string, err error) {
	if b, sum, ok := encodeFast(d, r, runAt, expireAfterSecs); ok {
		return b, hex.EncodeToString(sum[:]), nil
	}
	if hash, err = requestHashSlow(d, r, runAt, expireAfterSecs); err != nil {
		return nil, "", fmt.Errorf("hash enqueue request: %w", err)
	}
	if dispatch, err = json.Marshal(d); err != nil {
		return nil, "", fmt.Errorf("encode dispatch: %w", err)
	}
	return dispatch, hash, nil
}

// encodeFast writes the dispatch as stored and hashes the canonical
// request from the same bytes. It covers the common shape, a flat-form
// subject with no input, vars or actor and valid UTF-8 text, and reports
// false for anything else.
//
// The dispatch is written with its keys in bytewise order and the
// canonical escaping, so the canonical request's dispatch is the stored
// one without its requested_at member and with the metadata canonical:
// the hash reads the stored bytes around those two places instead of a
// second 12 KB encoding of the description (docs/benchmarks-history.md
// has what each cost).
func encodeFast(d SubjectDispatch, r *Reservation, runAt *string, expireAfterSecs *uint64) (dispatch []byte, sum [32]byte, ok bool) {
	sub := d.Subject
	if sub == nil || len(d.Input) != 0 || len(d.Vars) != 0 || d.Actor != nil ||
		asciiEqualFold(sub.Kind, KindTask) || asciiEqualFold(sub.Kind, KindRequirement) || asciiEqualFold(sub.Kind, KindCustom) {
		return nil, sum, false
	}
	size := 256 + len(sub.Metadata)
	valid := func(texts ...string) bool {
		for _, t := range texts {
			if !utf8.ValidString(t) {
				return false
			}
			size += len(t) + 8
		}
		return true
	}
	if !valid(d.WorkflowRef, d.Priority, d.TriggerSource, sub.Kind, sub.ID, sub.Title, sub.Description) || !valid(sub.Labels...) {
		return nil, sum, false
	}
	if r != nil && !valid(r.Repository, r.BaseRef, r.HeadRef) || runAt != nil && !valid(*runAt) {
		return nil, sum, false
	}
	var canonMeta []byte
	if !metadataEmpty(sub.Metadata) {
		var err error
		if canonMeta, err = canonicalJSON(sub.Metadata); err != nil {
			return nil, sum, false
		}
	}
	at, err := d.RequestedAt.MarshalJSON()
	if err != nil {
		return nil, sum, false
	}

	b := new(bytes.Buffer)
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
			canonjson.WriteString(b, v)
		}
	}
	open()
	str("priority", d.Priority, true)
	atStart := b.Len() // requested_at, with the comma before it if any
	key("requested_at")
	b.Write(at)
	atEnd := b.Len()
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
			canonjson.WriteString(b, l)
		}
		b.WriteByte(']')
	}
	metaStart, metaEnd := -1, -1
	if canonMeta != nil {
		key("metadata")
		metaStart = b.Len()
		// Stored as sent (compacted): the canonical form may spell a number
		// otherwise (1e3 as 1000.0), and entry/get gives the metadata back.
		if json.Compact(b, sub.Metadata) != nil {
			return nil, sum, false
		}
		metaEnd = b.Len()
	}
	str("title", sub.Title, true)
	end()
	str("trigger_source", d.TriggerSource, false)
	str("workflow_ref", d.WorkflowRef, false)
	end()
	dispatch = b.Bytes()

	// The canonical request: {"dispatch":D,"expire_after_secs":N,
	// "repository":R,"run_at":S}, D being dispatch without requested_at.
	h := sha256.New()
	h.Write([]byte(`{"dispatch":`))
	if atStart == 1 {
		// No member before requested_at: drop the comma after it instead.
		h.Write(dispatch[:1])
		atEnd++
	} else {
		h.Write(dispatch[:atStart])
	}
	if canonMeta != nil {
		h.Write(dispatch[atEnd:metaStart])
		h.Write(canonMeta)
		h.Write(dispatch[metaEnd:])
	} else {
		h.Write(dispatch[atEnd:])
	}
	b = new(bytes.Buffer) // the closures write the tail here; dispatch keeps its bytes
	first = false
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
		canonjson.WriteString(b, *runAt)
	} else {
		b.WriteString("null")
	}
	end()
	h.Write(b.Bytes())
	h.Sum(sum[:0])
	return dispatch, sum, true
}
