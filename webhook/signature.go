package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/google/go-github/v66/github"
)

// SignatureHeader is the header GitHub puts the HMAC-SHA256 signature in.
const SignatureHeader = github.SHA256SignatureHeader

// signaturePrefix starts every X-Hub-Signature-256 value.
const signaturePrefix = "sha256="

// ErrSignatureMissing is returned by Verifier.Verify when the delivery has no
// X-Hub-Signature-256 value.
var ErrSignatureMissing = errors.New("missing " + SignatureHeader + " signature")

// ErrSignatureMismatch is returned by Verifier.Verify when the signature is
// malformed or no configured secret produces it.
var ErrSignatureMismatch = errors.New(SignatureHeader + " does not match any configured webhook secret")

// ErrSignatureMalformed is returned by ParseSignature when the
// X-Hub-Signature-256 value is not "sha256=" followed by 64 hex digits.
var ErrSignatureMalformed = errors.New("malformed " + SignatureHeader + " signature: want sha256=<64 hex digits>")

// ParseSignature decodes an X-Hub-Signature-256 value, "sha256=<64 hex>",
// into the 32 bytes of the HMAC it carries. It reads only the header, so
// the intake can refuse a delivery that could never verify before reading
// its body. It returns ErrSignatureMissing for an empty value and
// ErrSignatureMalformed for anything else that is not of that form
// (another algorithm, a wrong length, a non-hex digit, spaces).
func ParseSignature(v string) ([]byte, error) {
	if v == "" {
		return nil, ErrSignatureMissing
	}
	digits, ok := strings.CutPrefix(v, signaturePrefix)
	if !ok || len(digits) != 2*32 {
		return nil, ErrSignatureMalformed
	}
	mac, err := hex.DecodeString(digits)
	if err != nil {
		return nil, ErrSignatureMalformed
	}
	return mac, nil
}

// Verifier checks GitHub's HMAC-SHA256 delivery signatures against one or
// more secrets, so a secret can be rotated without dropping deliveries. It is
// safe for concurrent use.
type Verifier struct {
	secrets [][]byte
}

// NewVerifier returns a Verifier over secrets, in order: Verify reports the
// index of the one that matched. It returns an error when there is no secret
// or one of them is empty, since an empty HMAC key verifies anything signed
// without a secret.
func NewVerifier(secrets ...string) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("webhook verifier needs at least one secret")
	}
	v := &Verifier{secrets: make([][]byte, len(secrets))}
	for i, s := range secrets {
		if s == "" {
			return nil, errors.New("webhook verifier: a secret is empty")
		}
		v.secrets[i] = []byte(s)
	}
	return v, nil
}

// Verify checks signature (the X-Hub-Signature-256 value, "sha256=<hex>")
// over body, the raw request body as received, against every configured
// secret with a constant-time comparison. It returns the index of the first
// secret that matches.
//
// It returns ErrSignatureMissing when signature is empty and
// ErrSignatureMismatch when it is not a sha256 signature or matches no
// secret. The comparison is hmac.Equal, which takes the same time wherever
// the signatures differ; every secret is tried, so the time taken does not
// tell which one matched either.
func (v *Verifier) Verify(signature string, body []byte) (int, error) {
	return v.VerifyParts(signature, body)
}

// VerifyParts is Verify over a body given in consecutive parts, as the
// intake reads it, so that verifying needs no copy of the whole.
func (v *Verifier) VerifyParts(signature string, parts ...[]byte) (int, error) {
	if signature == "" {
		return -1, ErrSignatureMissing
	}
	// Only SHA-256: a downgrade to SHA-1 (or another algorithm) must not pass.
	want, err := ParseSignature(signature)
	if err != nil {
		return -1, ErrSignatureMismatch
	}
	matched := -1
	for i, secret := range v.secrets {
		m := hmac.New(sha256.New, secret)
		for _, p := range parts {
			m.Write(p)
		}
		if hmac.Equal(m.Sum(nil), want) && matched < 0 {
			matched = i
		}
	}
	if matched < 0 {
		return -1, ErrSignatureMismatch
	}
	return matched, nil
}

// Sign returns the X-Hub-Signature-256 value GitHub sends for body under
// secret: "sha256=" and the hex HMAC-SHA256. gitlease deliver and the tests
// sign with it.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return signaturePrefix + hex.EncodeToString(mac.Sum(nil))
}
