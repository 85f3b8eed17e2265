package queue

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/gitlease/gitlease/queue/canonjson"
)

// The request hash (protocol/queue-v2.md §3.3) must equal the reference's
// byte for byte, so canonicalJSON reproduces what the reference does: parse
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
// accepted (see canonicalJSON), and a plain error when d cannot be encoded.
func RequestHash(d SubjectDispatch, r *Reservation, runAt *string, expireAfterSecs *uint64) (string, error) {
	if _, sum, ok := encodeFast(d, r, runAt, expireAfterSecs); ok {
		return hex.EncodeToString(sum[:]), nil
	}
	return requestHashSlow(d, r, runAt, expireAfterSecs)
}

// requestHashSlow is RequestHash by way of the wire form: encode the
// dispatch, decode it into a map, encode and canonicalise the content. It
// is the definition encodeFast must agree with.
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
	canon, err := canonicalJSON(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// canonicalJSON re-encodes the JSON text v as the reference prints it
// (see package canonjson for exactly how). It returns an *InvalidError when
// v is not a single valid JSON value or is one serde_json rejects.
func canonicalJSON(v []byte) ([]byte, error) {
	out, err := canonjson.Canonical(v)
	var se *canonjson.SyntaxError
	if errors.As(err, &se) {
		return nil, invalidf("%s", se.Msg)
	}
	return out, err
}
