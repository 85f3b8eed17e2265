package webhook

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The intake's limits on what an unauthenticated client can make the server
// hold (docs/webhook.md): every check here runs before a byte of the body is read,
// so a client without the webhook secret costs headers, never 25 MiB.

// DefaultMaxInflightBody is HandlerConfig.MaxInflightBody's default, 64 MiB:
// two largest deliveries at once, and many ordinary ones.
const DefaultMaxInflightBody = 64 << 20

// bodyBudget bounds the webhook body bytes all requests hold together,
// counted as they arrive, never as Content-Length claims them: a client
// that claims 25 MiB and trickles holds only what it sent (and is cut off
// for being slow, meteredBody). A body that would take the total past the
// budget is refused (503) at once rather than queued, so a flood of large
// bodies is answered 503 instead of filling memory or piling up
// goroutines.
type bodyBudget struct {
	held atomic.Int64
	max  int64
}

func newBodyBudget(max int64) *bodyBudget {
	if max <= 0 {
		max = DefaultMaxInflightBody
	}
	return &bodyBudget{max: max}
}

// take reserves n more bytes, or reports false (reserving nothing) when
// they do not fit.
func (b *bodyBudget) take(n int64) bool {
	if b.held.Add(n) > b.max {
		b.held.Add(-n)
		return false
	}
	return true
}

// full reports whether no byte fits any more.
func (b *bodyBudget) full() bool { return b.held.Load() >= b.max }

// admit runs the checks of docs/webhook.md that precede reading the body, in its
// order: 413 for a declared body over MaxBody, 400 for missing or
// malformed event and delivery headers, 401 for a missing or malformed
// signature header, 503 when the budget is already spent. It returns a
// non-zero status and the reason to refuse with.
func (b *bodyBudget) admit(r *http.Request) (status int, msg string) {
	if r.ContentLength > MaxBody {
		return http.StatusRequestEntityTooLarge, "body larger than 25 MiB"
	}
	if msg := checkHeaders(r.Header.Get(EventHeader), r.Header.Get(DeliveryHeader)); msg != "" {
		return http.StatusBadRequest, msg
	}
	if _, err := ParseSignature(r.Header.Get(SignatureHeader)); err != nil {
		return http.StatusUnauthorized, err.Error()
	}
	if b.full() {
		return http.StatusServiceUnavailable, errBudget.Error()
	}
	return 0, ""
}

// MinBodyRate is the slowest a webhook body may arrive after its first
// BodyRateGrace: GitHub sends a delivery at once, and a slower sender is
// cut off (408) so that it cannot hold a connection, a goroutine and a
// share of the body budget for the server's whole read timeout.
const (
	MinBodyRate   = 64 << 10 // bytes per second
	BodyRateGrace = time.Second
)

var (
	// errBudget ends a body whose bytes would pass MaxInflightBody.
	errBudget = errors.New("too many webhook bodies in flight; redeliver later")
	// errTooSlow ends a body arriving slower than MinBodyRate.
	errTooSlow = errors.New("the body arrived slower than 64 KiB/s")
)

// meteredBody reads a request body for the intake: each byte it returns
// is first taken from the budget (and given back by close), and once
// BodyRateGrace has passed since it started, the bytes must keep up with
// MinBodyRate counted from then. A sender that falls behind is cut off:
// a Read that finds it behind fails with errTooSlow, and a sender that
// stalls has its connection's read deadline set to now by a timer, which
// ends the Read it blocks. It is used by one goroutine; close must be
// called once reading is over.
type meteredBody struct {
	r      io.Reader
	budget *bodyBudget
	rc     *http.ResponseController
	start  time.Time
	n      int64 // bytes read, all taken from the budget
	timer  *time.Timer

	mu      sync.Mutex // guards closed against the timer
	closed  bool
	stalled bool
}

func newMeteredBody(w http.ResponseWriter, r io.Reader, budget *bodyBudget, now time.Time) *meteredBody {
	m := &meteredBody{r: r, budget: budget, rc: http.NewResponseController(w), start: now}
	m.timer = time.AfterFunc(m.deadline().Sub(now), m.cut)
	return m
}

// deadline is when the sender falls behind unless more than the bytes
// read so far have arrived.
func (m *meteredBody) deadline() time.Time {
	return m.start.Add(BodyRateGrace + time.Duration(m.n)*time.Second/MinBodyRate)
}

// cut ends a stalled sender's Read by moving its connection's read
// deadline to now (where the ResponseWriter cannot, the server's own read
// timeout still ends it).
func (m *meteredBody) cut() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.stalled = true
	_ = m.rc.SetReadDeadline(time.Now())
}

func (m *meteredBody) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if n > 0 {
		if !m.budget.take(int64(n)) {
			return 0, errBudget
		}
		m.n += int64(n)
	}
	now := time.Now()
	m.mu.Lock()
	stalled := m.stalled
	m.mu.Unlock()
	if d := m.deadline(); stalled || now.After(d) {
		return n, errTooSlow
	} else if err == nil {
		m.timer.Reset(d.Sub(now))
	}
	return n, err
}

// close stops the rate check and gives the bytes read back to the budget.
func (m *meteredBody) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.timer.Stop()
	m.budget.held.Add(-m.n)
	m.n = 0
}

// chunkSize is the unit a webhook body is read in: an ordinary delivery
// (tens of KiB) fits one chunk, and a body holds at most one chunk more
// than the bytes that have arrived.
const chunkSize = 64 << 10

// chunkPool keeps body chunks for the next deliveries: a body is the
// largest allocation of a delivery, and the garbage collector's share of
// serve's CPU follows the bytes allocated per delivery. Reading in
// reused chunks rather than a buffer grown by doubling also leaves no
// garbage behind a body being read, so a flood of large bodies costs
// what the budget admits, not a multiple of it.
type chunkPool struct{ p sync.Pool }

// chunks is one body being read: its bytes in order, n in all.
type chunks struct {
	pool *chunkPool
	list []*[chunkSize]byte
	n    int
}

func (cp *chunkPool) body() *chunks { return &chunks{pool: cp} }

// readFrom reads r to its end (io.EOF), appending chunks as they fill.
func (c *chunks) readFrom(r io.Reader) error {
	for {
		off := c.n - (len(c.list)-1)*chunkSize
		if len(c.list) == 0 || off == chunkSize {
			ch, ok := c.pool.p.Get().(*[chunkSize]byte)
			if !ok {
				ch = new([chunkSize]byte)
			}
			c.list, off = append(c.list, ch), 0
		}
		k, err := r.Read(c.list[len(c.list)-1][off:])
		c.n += k
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
	}
}

// parts are the body's bytes, chunk by chunk, valid until release.
func (c *chunks) parts() [][]byte {
	ps := make([][]byte, len(c.list))
	rest := c.n
	for i, ch := range c.list {
		ps[i] = ch[:min(rest, chunkSize)]
		rest -= len(ps[i])
	}
	return ps
}

// bytes returns the body in one slice: the chunk itself for a body of one
// chunk (valid until release), else a copy, after which the chunks go
// back to the pool.
func (c *chunks) bytes() []byte {
	if len(c.list) <= 1 {
		if len(c.list) == 0 {
			return nil
		}
		return c.list[0][:c.n]
	}
	b := make([]byte, 0, c.n)
	for _, p := range c.parts() {
		b = append(b, p...)
	}
	c.release()
	return b
}

// release gives the chunks back to the pool; nothing may use the parts
// or a one-chunk bytes afterwards.
func (c *chunks) release() {
	for _, ch := range c.list {
		c.pool.p.Put(ch)
	}
	c.list, c.n = nil, 0
}
