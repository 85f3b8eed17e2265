package webhook

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"

	"golang.org/x/sync/semaphore"
)

// The intake's limits on what an unauthenticated client can make the server
// hold (docs/webhook.md): every check here runs before a byte of the body is read,
// so a client without the webhook secret costs headers, never 25 MiB.

// DefaultMaxInflightBody is HandlerConfig.MaxInflightBody's default, 64 MiB:
// two largest deliveries at once, and many ordinary ones.
const DefaultMaxInflightBody = 64 << 20

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

// bodyBudget bounds the webhook body bytes all requests hold together. A
// request reserves its declared Content-Length (MaxBody when it declares
// none) before reading, and gives it back when it has been answered; a
// request that does not fit is refused at once rather than queued, so a
// flood of large bodies is answered 503 instead of filling memory or
// piling up goroutines.
type bodyBudget struct {
	sem *semaphore.Weighted
	max int64
}

func newBodyBudget(max int64) *bodyBudget {
	if max <= 0 {
		max = DefaultMaxInflightBody
	}
	return &bodyBudget{sem: semaphore.NewWeighted(max), max: max}
}

// admit runs the checks of docs/webhook.md that precede reading the body, in its
// order: 413 for a declared body over MaxBody, 400 for missing or
// malformed event and delivery headers, 401 for a missing or malformed
// signature header, 503 when the body would not fit in the budget. It
// returns a non-zero status and the reason to refuse with, or a release
// func the caller must call once it no longer holds the body.
func (b *bodyBudget) admit(r *http.Request) (release func(), status int, msg string) {
	if r.ContentLength > MaxBody {
		return nil, http.StatusRequestEntityTooLarge, "body larger than 25 MiB"
	}
	if msg := checkHeaders(r.Header.Get(EventHeader), r.Header.Get(DeliveryHeader)); msg != "" {
		return nil, http.StatusBadRequest, msg
	}
	if _, err := ParseSignature(r.Header.Get(SignatureHeader)); err != nil {
		return nil, http.StatusUnauthorized, err.Error()
	}
	n := int64(MaxBody)
	if r.ContentLength >= 0 {
		// A declared length is enforced by net/http: the body cannot be
		// longer, so it is all the request can make the server hold.
		n = r.ContentLength
	}
	if !b.sem.TryAcquire(n) {
		return nil, http.StatusServiceUnavailable, "too many webhook bodies in flight; redeliver later"
	}
	return func() { b.sem.Release(n) }, 0, ""
}

// pooledBodyMax is the largest body buffer kept for reuse: ordinary
// deliveries are tens of KiB, and a 25 MiB one is not worth holding.
const pooledBodyMax = 256 << 10

// bodyPool keeps read buffers of bodies for the next deliveries. A body is
// the largest allocation of a delivery, and the garbage collector's share
// of serve's CPU follows the bytes allocated per delivery.
type bodyPool struct{ p sync.Pool }

// get returns an empty buffer with room for at least n bytes.
func (bp *bodyPool) get(n int) *[]byte {
	if b, ok := bp.p.Get().(*[]byte); ok && cap(*b) >= n {
		return b
	}
	b := make([]byte, 0, max(n, 32<<10))
	return &b
}

// put keeps b for a later get, unless it is too large to be worth keeping.
// Nothing may use *b afterwards.
func (bp *bodyPool) put(b *[]byte) {
	if cap(*b) <= pooledBodyMax {
		*b = (*b)[:0]
		bp.p.Put(b)
	}
}
