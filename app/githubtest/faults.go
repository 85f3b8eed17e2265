package githubtest

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

type faultKind int

const (
	faultStatus    faultKind = iota // answer status, no effect
	faultSecondary                  // 403 secondary rate limit, no effect
	faultLost                       // apply, then answer status (the response is lost)
)

// fault is one queued fault, good for n more requests.
type fault struct {
	kind       faultKind
	status     int
	retryAfter int
	n          int
}

func (f *fault) name() string {
	switch f.kind {
	case faultSecondary:
		return "secondary_rate_limit"
	case faultLost:
		return "lost_" + strconv.Itoa(f.status)
	}
	return "status_" + strconv.Itoa(f.status)
}

// faults is the fault-injection state (guarded by Server.mu).
type faults struct {
	perKind map[Kind][]*fault
	primary struct {
		n     int
		reset time.Time
	}
	random struct {
		p     float64
		rng   *rand.Rand
		kinds map[Kind]bool // nil: every kind
	}
}

func (fs *faults) init() { fs.perKind = map[Kind][]*fault{} }

func (fs *faults) push(kind Kind, f *fault) { fs.perKind[kind] = append(fs.perKind[kind], f) }

func (fs *faults) pop(kind Kind) *fault {
	q := fs.perKind[kind]
	for len(q) > 0 && q[0].n <= 0 {
		q = q[1:]
	}
	fs.perKind[kind] = q
	if len(q) == 0 {
		return nil
	}
	q[0].n--
	return q[0]
}

// take returns the fault for a request of kind, if any: queued faults for
// the kind first, then those for AnyKind, then a random one.
func (fs *faults) take(kind Kind) *fault {
	if f := fs.pop(kind); f != nil {
		return f
	}
	if f := fs.pop(AnyKind); f != nil {
		return f
	}
	if fs.random.rng != nil && (fs.random.kinds == nil || fs.random.kinds[kind]) && fs.random.rng.Float64() < fs.random.p {
		switch fs.random.rng.IntN(4) {
		case 0:
			return &fault{kind: faultStatus, status: http.StatusInternalServerError}
		case 1:
			return &fault{kind: faultStatus, status: http.StatusBadGateway}
		case 2:
			return &fault{kind: faultStatus, status: http.StatusServiceUnavailable}
		default:
			return &fault{kind: faultSecondary, retryAfter: 1}
		}
	}
	return nil
}

func (fs *faults) primaryActive(now time.Time) bool {
	return fs.primary.n > 0 && now.Before(fs.primary.reset)
}

// faultResponse is what GitHub answers for an injected fault.
func (s *Server) faultResponse(c *call, f *fault) response {
	if f.kind == faultSecondary {
		res := response{
			status: http.StatusForbidden,
			body: errorBody(http.StatusForbidden,
				"You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID "+randomString(8)+".",
				"https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"),
		}
		if f.retryAfter > 0 {
			res.header = map[string]string{"Retry-After": strconv.Itoa(f.retryAfter)}
		}
		return res
	}
	msg := http.StatusText(f.status)
	switch f.status {
	case http.StatusInternalServerError, http.StatusBadGateway:
		msg = "Server Error"
	case http.StatusGatewayTimeout:
		msg = "We couldn't respond to your request in time. Sorry about that. Please try resubmitting your request and contact us if the problem persists."
	}
	return response{status: f.status, body: errorBody(f.status, msg, docsREST)}
}

func (s *Server) checkKind(kind Kind) {
	s.tb.Helper()
	if kind == AnyKind {
		return
	}
	for _, k := range Kinds() {
		if k == kind {
			return
		}
	}
	s.tb.Fatalf("githubtest: unknown kind %q (see Kinds)", kind)
}

// FailNext makes the next n requests of kind (AnyKind: of any kind) fail
// with status (e.g. 502) and GitHub's error body, before they have any
// effect. Faults queue up: a kind's own faults are used before AnyKind's.
func (s *Server) FailNext(kind Kind, n, status int) {
	s.tb.Helper()
	s.checkKind(kind)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.push(kind, &fault{kind: faultStatus, status: status, n: n})
}

// FailEach makes the next n requests of each of kinds (every kind when none
// is given) fail with status, before any effect: "GitHub fails the first n
// calls of every kind".
func (s *Server) FailEach(n, status int, kinds ...Kind) {
	s.tb.Helper()
	if len(kinds) == 0 {
		kinds = Kinds()
	}
	for _, k := range kinds {
		s.FailNext(k, n, status)
	}
}

// SecondaryRateLimit makes the next n requests of kind (AnyKind: any kind)
// fail, before any effect, with GitHub's secondary rate limit answer: 403,
// "You have exceeded a secondary rate limit...", the secondary-rate-limit
// documentation_url (go-github returns *github.AbuseRateLimitError) and
// Retry-After: retryAfterSeconds (omitted when retryAfterSeconds <= 0, as
// GitHub sometimes does; clients then fall back to x-ratelimit-reset).
func (s *Server) SecondaryRateLimit(kind Kind, n, retryAfterSeconds int) {
	s.tb.Helper()
	s.checkKind(kind)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.push(kind, &fault{kind: faultSecondary, retryAfter: retryAfterSeconds, n: n})
}

// PrimaryRateLimit exhausts the installations' primary rate limit: requests
// made with an installation token are answered 403 with
// x-ratelimit-remaining: 0 and x-ratelimit-reset resetIn from now
// (go-github returns *github.RateLimitError), until n of them have been
// refused or the reset time has passed, whichever comes first.
func (s *Server) PrimaryRateLimit(n int, resetIn time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.primary.n = n
	s.faults.primary.reset = time.Now().Add(resetIn)
}

// LoseResponses makes the next n requests of kind (AnyKind: any kind) take
// effect and then answer 502, as when GitHub applied a write but the
// response was lost: the client cannot tell and must retry idempotently.
func (s *Server) LoseResponses(kind Kind, n int) {
	s.tb.Helper()
	s.checkKind(kind)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.push(kind, &fault{kind: faultLost, status: http.StatusBadGateway, n: n})
}

// FailRate makes each request of kinds (every kind when none is given) that
// no queued fault applies to fail with probability p, before any effect,
// with a 500, 502, 503 or a secondary rate limit (Retry-After: 1), drawn
// from a generator seeded with seed. p = 0 turns it off.
func (s *Server) FailRate(p float64, seed int64, kinds ...Kind) {
	s.tb.Helper()
	for _, k := range kinds {
		s.checkKind(k)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p <= 0 {
		s.faults.random.rng = nil
		return
	}
	s.faults.random.p = p
	s.faults.random.rng = rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15))
	s.faults.random.kinds = nil
	if len(kinds) > 0 {
		s.faults.random.kinds = map[Kind]bool{}
		for _, k := range kinds {
			s.faults.random.kinds[k] = true
		}
	}
}

// ClearFaults cancels every queued and random fault and any injected
// primary rate limit.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = faults{}
	s.faults.init()
}
