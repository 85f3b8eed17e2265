package github

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// writeBurst is how many writes a credential may make at once before
// pacing starts (GitHub's guidance: writes in series, about one a second).
const writeBurst = 5

// secondaryDefault is how long a secondary limit holds when GitHub's answer
// names no Retry-After (GitHub: "wait at least one minute").
const secondaryDefault = time.Minute

// waitInPlace is the longest a call waits for its credential's limit to
// lift before it gives up with a *LimitedError: short waits (a Retry-After
// of a second or two) are cheaper in place than a round trip through the
// outbox; long ones must not hold a claimed outbox row.
const waitInPlace = 2 * time.Second

// resetMargin is added to x-ratelimit-reset, a whole second on GitHub's
// clock, so a call never starts early on a clock slightly ahead of it.
const resetMargin = time.Second

// LimitedError is the error of a GitHub call the limiter did not start: its
// credential is rate-limited until Until. net/http wraps it in a
// *url.Error; find it with errors.As. Callers give the work back until
// Until rather than retry it sooner.
type LimitedError struct {
	Credential string    // "app" or "installation:<id>"
	Until      time.Time // no call with Credential starts before
	Reason     string    // "primary" or "secondary"
}

func (e *LimitedError) Error() string {
	return fmt.Sprintf("GitHub %s rate limit of %s holds until %s", e.Reason, e.Credential, e.Until.UTC().Format(time.RFC3339))
}

// limiter keeps GitHub's limits for every credential of the process, one
// limiter per credential (the App's JWT; each installation's token), as an
// http.RoundTripper every GitHub call passes: after a primary limit answer
// (x-ratelimit-remaining: 0) no call with that credential starts before
// x-ratelimit-reset; after a secondary limit none starts before
// Retry-After (a minute when absent); writes (POST, PATCH, PUT, DELETE) of
// one credential run one at a time and, after a burst of 5, at most
// writesPerSec a second. Each call is bounded by requestTimeout from the
// moment it starts (time spent waiting for its turn does not count). It is
// safe for concurrent use, and it must be the one instance all clients of
// the process share.
type limiter struct {
	next         http.RoundTripper
	writesPerSec float64
	now          func() time.Time

	mu     sync.Mutex
	byCred map[string]*credential
}

// credential is the limiter state of one credential.
type credential struct {
	writes chan struct{} // one slot: one write at a time
	pace   *rate.Limiter // nil: writes unpaced

	mu     sync.Mutex
	until  time.Time // no call starts before
	reason string
}

// newLimiter returns the limiter over next (http.DefaultTransport when nil);
// writesPerSec 0 leaves writes unpaced (rate-limit answers are honoured
// whatever it is). It returns an error for a negative writesPerSec.
func newLimiter(next http.RoundTripper, writesPerSec float64) (*limiter, error) {
	if writesPerSec < 0 {
		return nil, fmt.Errorf("GitHub writes per second %v is negative", writesPerSec)
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &limiter{next: next, writesPerSec: writesPerSec, now: time.Now, byCred: map[string]*credential{}}, nil
}

func (l *limiter) credential(name string) *credential {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.byCred[name]
	if c == nil {
		c = &credential{writes: make(chan struct{}, 1)}
		if l.writesPerSec > 0 {
			c.pace = rate.NewLimiter(rate.Limit(l.writesPerSec), writeBurst)
		}
		l.byCred[name] = c
	}
	return c
}

// installationKey carries the installation a request is made as, for the
// limiter under ghinstallation (which sees only the token).
type installationKey struct{}

// asInstallation tags every request with its installation ID.
type asInstallation struct {
	id   int64
	next http.RoundTripper
}

func (t asInstallation) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.next.RoundTrip(r.WithContext(context.WithValue(r.Context(), installationKey{}, t.id)))
}

// credentialOf names the credential a request is made with: the App's JWT
// (Bearer: token minting, GET /app, the delivery log) or an installation's
// token.
func credentialOf(r *http.Request) string {
	if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		return "app"
	}
	if id, ok := r.Context().Value(installationKey{}).(int64); ok {
		return "installation:" + strconv.FormatInt(id, 10)
	}
	return "anonymous"
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// RoundTrip starts r once its credential allows, and learns the
// credential's limits from the answer. It returns a *LimitedError without
// calling GitHub when the credential is limited for longer than it may
// wait, and r's context error when that ends first.
func (l *limiter) RoundTrip(r *http.Request) (*http.Response, error) {
	name := credentialOf(r)
	c := l.credential(name)
	ctx := r.Context()
	if isWrite(r.Method) {
		select {
		case c.writes <- struct{}{}:
		case <-ctx.Done():
			closeBody(r)
			return nil, ctx.Err()
		}
		defer func() { <-c.writes }()
		if c.pace != nil {
			if err := c.pace.Wait(ctx); err != nil {
				closeBody(r)
				return nil, fmt.Errorf("wait for GitHub write pacing: %w", err)
			}
		}
	}
	if err := l.waitLimit(ctx, name, c); err != nil {
		closeBody(r)
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout)
	resp, err := l.next.RoundTrip(r.WithContext(cctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	l.learn(c, resp)
	return resp, nil
}

// waitLimit returns once no limit holds for c, after waiting at most
// waitInPlace; a longer limit is a *LimitedError.
func (l *limiter) waitLimit(ctx context.Context, name string, c *credential) error {
	for {
		c.mu.Lock()
		until, reason := c.until, c.reason
		c.mu.Unlock()
		wait := until.Sub(l.now())
		if wait <= 0 {
			return nil
		}
		if wait > waitInPlace {
			return &LimitedError{Credential: name, Until: until, Reason: reason}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// learn records a limit GitHub answered for c.
func (l *limiter) learn(c *credential, resp *http.Response) {
	until, reason := limitOf(resp, l.now())
	if until.IsZero() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if until.After(c.until) {
		c.until, c.reason = until, reason
	}
}

// limitOf reads the limit an answer sets, if any: a primary limit (403 or
// 429 with x-ratelimit-remaining 0, or any answer spending the last call)
// until x-ratelimit-reset; a secondary limit (403 or 429 with Retry-After,
// or GitHub's secondary-limit message) for Retry-After or a minute.
func limitOf(resp *http.Response, now time.Time) (time.Time, string) {
	h := resp.Header
	limited := resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests
	if limited {
		if s := h.Get("Retry-After"); s != "" {
			if secs, err := strconv.Atoi(s); err == nil && secs >= 0 {
				return now.Add(time.Duration(secs) * time.Second), "secondary"
			}
		}
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return time.Unix(reset, 0).Add(resetMargin), "primary"
		}
		if limited {
			return now.Add(secondaryDefault), "primary"
		}
	}
	if limited && secondaryMessage(resp) {
		return now.Add(secondaryDefault), "secondary"
	}
	return time.Time{}, ""
}

// secondaryMessage reports whether a 403 or 429 body is GitHub's secondary
// rate limit message, leaving the body readable for the caller.
func secondaryMessage(resp *http.Response) bool {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), resp.Body), resp.Body}
	if err != nil {
		return false
	}
	low := bytes.ToLower(b)
	return bytes.Contains(low, []byte("secondary rate limit")) || bytes.Contains(low, []byte("abuse detection"))
}

func closeBody(r *http.Request) {
	if r.Body != nil {
		r.Body.Close()
	}
}

// cancelOnClose ends a call's timeout context when its body is closed, so
// the body stays readable until then.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
