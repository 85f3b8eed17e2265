package github

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// contentPerMinute is GitHub's documented limit of content-creating
// requests a minute (REST docs, "secondary rate limits").
const contentPerMinute = 80

// budgetEvery is how often at most an installation's budget is recorded
// while it is not limited: the dashboard's figure, not a control.
const budgetEvery = 5 * time.Second

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
	Reason     string    // "primary", "secondary" or "content" (paced ahead of GitHub's content limits)
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
// writesPerSec a second; content-creating requests of one installation
// (contentCreating) stay within 80 in any minute and contentPerHour in any
// hour, sliding windows paced ahead of time, so GitHub's secondary limit is
// never met. Each call is bounded by requestTimeout from the moment it
// starts (time spent waiting for its turn does not count). With a
// BudgetRecorder, each installation's budget as GitHub's headers say it,
// and every limit, are recorded for every instance to see. It is safe for
// concurrent use, and it must be the one instance all clients of the
// process share.
type limiter struct {
	next           http.RoundTripper
	writesPerSec   float64
	contentPerHour int
	budgets        BudgetRecorder
	now            func() time.Time

	mu     sync.Mutex
	byCred map[string]*credential
}

// Budget is what the limiter knows of one installation's GitHub budget:
// what the last answer's x-ratelimit headers said (nil when it said
// nothing), and until when no call with its credential starts, and why.
type Budget struct {
	InstallationID int64
	Remaining      *int
	Limit          *int
	Reset          *time.Time
	LimitedUntil   time.Time // zero: not limited
	Reason         string    // of LimitedUntil: "primary", "secondary" or "content"
	Observed       time.Time
}

// BudgetRecorder keeps installations' budgets where every instance sees
// them (Budgets, over PostgreSQL). RecordBudget must not block for long: the
// call that learned the budget waits for it.
type BudgetRecorder interface {
	RecordBudget(ctx context.Context, b Budget)
}

// credential is the limiter state of one credential.
type credential struct {
	installation int64         // 0: the App's JWT (or anonymous)
	writes       chan struct{} // one slot: one write at a time
	pace         *rate.Limiter // nil: writes unpaced
	waiting      atomic.Int32  // writes waiting for the slot, for pacing or for content pacing
	// The content-creating requests' windows, used under the write slot;
	// nil: unpaced (the App's JWT creates no content).
	minute, hour *window

	mu       sync.Mutex
	until    time.Time // no call starts before
	reason   string
	recorded time.Time // when the budget was last recorded
}

// newLimiter returns the limiter over next (http.DefaultTransport when nil);
// writesPerSec 0 leaves writes unpaced, contentPerHour 0 content-creating
// requests (rate-limit answers are honoured whatever they are); budgets,
// when not nil, is told each installation's budget. It returns an error for
// a negative writesPerSec or contentPerHour.
func newLimiter(next http.RoundTripper, writesPerSec float64, contentPerHour int, budgets BudgetRecorder) (*limiter, error) {
	if writesPerSec < 0 {
		return nil, fmt.Errorf("GitHub writes per second %v is negative", writesPerSec)
	}
	if contentPerHour < 0 {
		return nil, fmt.Errorf("GitHub content-creating requests per hour %d is negative", contentPerHour)
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &limiter{next: next, writesPerSec: writesPerSec, contentPerHour: contentPerHour, budgets: budgets,
		now: time.Now, byCred: map[string]*credential{}}, nil
}

func (l *limiter) credential(name string, installation int64) *credential {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.byCred[name]
	if c == nil {
		c = &credential{installation: installation, writes: make(chan struct{}, 1)}
		if l.writesPerSec > 0 {
			c.pace = rate.NewLimiter(rate.Limit(l.writesPerSec), writeBurst)
		}
		if l.contentPerHour > 0 && installation != 0 {
			c.minute = newWindow(min(contentPerMinute, l.contentPerHour), time.Minute)
			c.hour = newWindow(l.contentPerHour, time.Hour)
		}
		l.byCred[name] = c
	}
	return c
}

// window is a sliding window of the start times of the last size requests:
// one more may start once the oldest of them is span old.
type window struct {
	span  time.Duration
	times []time.Time // a ring once full
	head  int         // the oldest, once full
	size  int
}

func newWindow(size int, span time.Duration) *window {
	return &window{span: span, size: size}
}

// next is the earliest time at or after now a request may start.
func (w *window) next(now time.Time) time.Time {
	if len(w.times) < w.size {
		return now
	}
	if t := w.times[w.head].Add(w.span); t.After(now) {
		return t
	}
	return now
}

// add records a request started at t.
func (w *window) add(t time.Time) {
	if len(w.times) < w.size {
		w.times = append(w.times, t)
		return
	}
	w.times[w.head] = t
	w.head = (w.head + 1) % w.size
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
// token, and the installation (0 for the App's JWT).
func credentialOf(r *http.Request) (string, int64) {
	if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		return "app", 0
	}
	if id, ok := r.Context().Value(installationKey{}).(int64); ok {
		return "installation:" + strconv.FormatInt(id, 10), id
	}
	return "anonymous", 0
}

// contentCreating reports whether a request creates content in GitHub's
// sense (its secondary limits: about 80 a minute, 500 an hour): a POST that
// creates a commit, blob, tree, tag or ref, an issue, pull request, review
// or comment, a check run, or a release.
func contentCreating(method, path string) bool {
	if method != http.MethodPost {
		return false
	}
	path = strings.TrimSuffix(path, "/")
	for _, suffix := range []string{"/git/commits", "/git/blobs", "/git/trees", "/git/tags", "/git/refs",
		"/issues", "/pulls", "/reviews", "/comments", "/check-runs", "/releases"} {
		if strings.HasSuffix(path, suffix) {
			return true
		}
	}
	return false
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
	name, installation := credentialOf(r)
	c := l.credential(name, installation)
	ctx := r.Context()
	yields := yielding(ctx)
	if isWrite(r.Method) && yields {
		if !c.takeIdle(l.now()) {
			closeBody(r)
			return nil, ErrYielded
		}
		defer func() { <-c.writes }()
	} else if isWrite(r.Method) {
		c.waiting.Add(1)
		select {
		case c.writes <- struct{}{}:
		case <-ctx.Done():
			c.waiting.Add(-1)
			closeBody(r)
			return nil, ctx.Err()
		}
		defer func() { <-c.writes }()
		if c.pace != nil {
			if err := c.pace.Wait(ctx); err != nil {
				c.waiting.Add(-1)
				closeBody(r)
				return nil, fmt.Errorf("wait for GitHub write pacing: %w", err)
			}
		}
		if c.hour != nil && contentCreating(r.Method, r.URL.Path) {
			if err := l.paceContent(ctx, name, c); err != nil {
				c.waiting.Add(-1)
				closeBody(r)
				return nil, err
			}
		}
		c.waiting.Add(-1)
	}
	if yields {
		c.mu.Lock()
		limited := c.until.After(l.now())
		c.mu.Unlock()
		if limited || (c.hour != nil && contentCreating(r.Method, r.URL.Path)) {
			closeBody(r)
			return nil, ErrYielded
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
	l.learn(ctx, c, resp)
	return resp, nil
}

// ErrYielded is the error of a yielding write (Yielding) the limiter did
// not start because its credential's writes are backed up.
var ErrYielded = errors.New("GitHub write skipped: this credential's writes are backed up")

type yieldKey struct{}

// Yielding marks the writes made with ctx as ones that yield to every
// other write of their credential: such a write starts only when no other
// write runs or waits, pacing has a spare write (two in its bucket, so the
// next write that waits still finds one) and no rate limit holds;
// otherwise it fails at once with ErrYielded, never queued ahead of
// anything. A running command's progress on its check run is written so.
func Yielding(ctx context.Context) context.Context { return context.WithValue(ctx, yieldKey{}, true) }

func yielding(ctx context.Context) bool { v, _ := ctx.Value(yieldKey{}).(bool); return v }

// takeIdle takes the write slot for a yielding write when the credential's
// writes are idle, and one write of pacing; it reports whether it did.
func (c *credential) takeIdle(now time.Time) bool {
	if c.waiting.Load() > 0 {
		return false
	}
	select {
	case c.writes <- struct{}{}:
	default:
		return false
	}
	if c.waiting.Load() > 0 || (c.pace != nil && (c.pace.TokensAt(now) < 2 || !c.pace.AllowN(now, 1))) {
		<-c.writes
		return false
	}
	return true
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
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// paceContent returns once a content-creating request of c may start
// within both windows, and counts it; it waits in place up to
// waitInPlace, and past that records the wait (so the installation's items
// are passed over by leases until then; its reads and updates go on) and
// returns a *LimitedError. It runs under c's write slot: one at a time per credential.
func (l *limiter) paceContent(ctx context.Context, name string, c *credential) error {
	for {
		now := l.now()
		next := c.minute.next(now)
		if h := c.hour.next(now); h.After(next) {
			next = h
		}
		wait := next.Sub(now)
		if wait <= 0 {
			c.minute.add(now)
			c.hour.add(now)
			return nil
		}
		if wait > waitInPlace {
			l.record(ctx, c, next, "content", nil)
			return &LimitedError{Credential: name, Until: next, Reason: "content"}
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// sleep waits for d, or returns ctx's error when it ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// learn records a limit GitHub answered for c, and the budget its headers
// name.
func (l *limiter) learn(ctx context.Context, c *credential, resp *http.Response) {
	until, reason := limitOf(resp, l.now())
	l.limit(ctx, c, until, reason, resp.Header)
}

// limit records that no call with c starts before until (none when zero)
// and, for an installation, its budget from h.
func (l *limiter) limit(ctx context.Context, c *credential, until time.Time, reason string, h http.Header) {
	c.mu.Lock()
	if until.After(c.until) {
		c.until, c.reason = until, reason
	}
	c.mu.Unlock()
	l.record(ctx, c, until, reason, h)
}

// record tells the BudgetRecorder, for an installation, of a limit until
// (none when zero) and the budget h names (nil: none known): at once for a
// limit, else at most every budgetEvery.
func (l *limiter) record(ctx context.Context, c *credential, until time.Time, reason string, h http.Header) {
	now := l.now()
	c.mu.Lock()
	record := l.budgets != nil && c.installation != 0 && (!until.IsZero() || now.Sub(c.recorded) >= budgetEvery)
	if record {
		c.recorded = now
	}
	c.mu.Unlock()
	if !record {
		return
	}
	b := Budget{InstallationID: c.installation, Observed: now}
	if !until.IsZero() {
		b.LimitedUntil, b.Reason = until, reason
	}
	if h != nil {
		b.Remaining, b.Limit = headerInt(h, "X-RateLimit-Remaining"), headerInt(h, "X-RateLimit-Limit")
		if reset := headerInt(h, "X-RateLimit-Reset"); reset != nil {
			t := time.Unix(int64(*reset), 0)
			b.Reset = &t
		}
	}
	l.budgets.RecordBudget(context.WithoutCancel(ctx), b)
}

// headerInt is h's name as a non-negative integer, nil when absent or not one.
func headerInt(h http.Header, name string) *int {
	n, err := strconv.Atoi(h.Get(name))
	if err != nil || n < 0 {
		return nil
	}
	return &n
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
