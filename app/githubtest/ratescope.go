package githubtest

import (
	"net/http"
	"strconv"
	"time"
)

// InFlightGrace is how long after the fake answered a rate limit a call of
// the same credential may still arrive without being a violation: it was
// already in flight (sent before the client could have read the answer).
const InFlightGrace = 250 * time.Millisecond

// secondaryWait is what GitHub asks after a secondary limit answered
// without Retry-After: wait at least a minute.
const secondaryWait = time.Minute

// rateScope is one rate limit the fake answered: no call of identity may
// start between answered (plus InFlightGrace) and deadline, on any route.
type rateScope struct {
	answered, deadline time.Time
	reason             string
}

// rateScopes is the rate-limit scope state (guarded by Server.mu).
type rateScopes struct {
	byIdentity map[string]rateScope
	early      int
}

// checkScope records a violation on c if it arrived while its identity
// was limited: after the limit was answered (plus InFlightGrace) and
// before its deadline. GitHub escalates such calls to a ban.
func (s *Server) checkScope(c *call, identity string, arrived time.Time) {
	sc, ok := s.scopes.byIdentity[identity]
	if !ok || !arrived.After(sc.answered.Add(InFlightGrace)) || !arrived.Before(sc.deadline) {
		return
	}
	s.scopes.early++
	c.violatef("call started while %s was %s rate-limited: answered at %s, no call before %s (%s early)",
		identity, sc.reason, sc.answered.Format(time.RFC3339Nano), sc.deadline.Format(time.RFC3339),
		sc.deadline.Sub(arrived).Round(time.Millisecond))
}

// recordScope opens a scope when res is a rate-limit answer: a primary
// limit until its x-ratelimit-reset, a secondary one for its Retry-After or,
// without one, a minute.
func (s *Server) recordScope(identity, fault string, res response, now time.Time) {
	var sc rateScope
	switch fault {
	case "primary_rate_limit":
		reset, err := strconv.ParseInt(res.header["X-RateLimit-Reset"], 10, 64)
		if err != nil {
			return
		}
		sc = rateScope{answered: now, deadline: time.Unix(reset, 0), reason: "primary"}
	case "secondary_rate_limit":
		sc = rateScope{answered: now, deadline: now.Add(secondaryWait), reason: "secondary"}
		if ra, err := strconv.Atoi(res.header["Retry-After"]); err == nil {
			sc.deadline = now.Add(time.Duration(ra) * time.Second)
		}
	default:
		return
	}
	if res.status != http.StatusForbidden && res.status != http.StatusTooManyRequests {
		return
	}
	if s.scopes.byIdentity == nil {
		s.scopes.byIdentity = map[string]rateScope{}
	}
	if old, ok := s.scopes.byIdentity[identity]; ok && old.deadline.After(sc.deadline) {
		sc.deadline = old.deadline
	}
	s.scopes.byIdentity[identity] = sc
}

// EndRateLimits closes every rate-limit scope the fake opened, as if each
// limit had reset: for a test whose next call stands for a client that
// waited as it was told, without the test waiting. Calls already counted by
// EarlyCalls stay counted.
func (s *Server) EndRateLimits() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scopes.byIdentity = nil
}

// EarlyCalls returns how many calls started while their credential was
// rate-limited (each is also a violation): a client that keeps GitHub's
// limits makes none.
func (s *Server) EarlyCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scopes.early
}
