package github

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v5"
	gh "github.com/google/go-github/v66/github"
)

// Retries is how a GitHub call is retried in place after a transient
// failure (a 5xx, a connection error, a timeout): up to Tries more times,
// the first pause near Initial, doubling, jittered by half either way.
type Retries struct {
	Tries   uint          // retries after the first call; 3
	Initial time.Duration // first pause; 250ms
}

func (r *Retries) defaults() {
	if r.Tries == 0 {
		r.Tries = 3
	}
	if r.Initial <= 0 {
		r.Initial = 250 * time.Millisecond
	}
}

// BackOff is the one backoff policy of the GitHub side: from initial,
// doubling, jittered by half either way, capped at maxInterval. Calls
// retried in place (Retry) and outbox rows retried later both follow it.
func BackOff(initial, maxInterval time.Duration) *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval: initial, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: maxInterval,
	}
}

// Retry runs call, and again after each failure Classify finds worth
// retrying in place, while r's retries are left. attempt counts from 0; an
// attempt after a failure whose answer may have been lost (lost) must look
// before it creates. It returns call's last error; a rate limit, a
// permanent 4xx and ctx's end stop it at once. Every attempt after the
// first follows a transient failure, so lost is attempt > 0.
func Retry[T any](ctx context.Context, r Retries, call func(attempt int, lost bool) (T, error)) (T, error) {
	r.defaults()
	attempt := 0
	return backoff.Retry(ctx, func() (T, error) {
		// Any transient failure may follow an applied write (a gateway
		// answering 502 for a backend that did the work, a lost answer).
		v, err := call(attempt, attempt > 0)
		attempt++
		if err != nil && !Classify(err, time.Time{}).InPlace {
			return v, backoff.Permanent(err)
		}
		return v, err
	}, backoff.WithBackOff(BackOff(r.Initial, 8*r.Initial)), backoff.WithMaxTries(r.Tries+1))
}

// PermanentError marks a call or write GitHub will never accept as it is:
// Classify calls it Permanent, so nothing retries it.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Verdict is what a failed GitHub call says about calling again. The zero
// Verdict is a failure to retry later, with backoff, but not in place.
type Verdict struct {
	// Permanent: GitHub refuses the call as it is (a 4xx other than 401
	// and 429, or a *PermanentError); calling again changes nothing.
	Permanent bool
	// InPlace: the failure is worth retrying at once, after a short pause:
	// a GitHub 5xx, or no answer at all (a connection error, a timeout).
	InPlace bool
	// Until, when set, is when a rate limit lifts (a *LimitedError, or
	// GitHub's primary or secondary limit answer): nothing may call before.
	Until time.Time
}

// Classify is the one reading of a GitHub call's error: whether it is
// permanent, retried in place, or held until a rate limit lifts. now is
// the clock a secondary limit's Retry-After counts from.
func Classify(err error, now time.Time) Verdict {
	var (
		perm     *PermanentError
		limited  *LimitedError
		rate     *gh.RateLimitError
		abuse    *gh.AbuseRateLimitError
		response *gh.ErrorResponse
	)
	switch {
	case errors.As(err, &perm):
		return Verdict{Permanent: true}
	case errors.As(err, &limited):
		return Verdict{Until: limited.Until}
	case errors.As(err, &rate):
		return Verdict{Until: rate.Rate.Reset.Time.Add(resetMargin)}
	case errors.As(err, &abuse):
		if abuse.RetryAfter != nil {
			return Verdict{Until: now.Add(*abuse.RetryAfter)}
		}
		return Verdict{Until: now.Add(secondaryDefault)}
	case errors.Is(err, context.Canceled):
		return Verdict{}
	case errors.As(err, &response) && response.Response != nil:
		code := response.Response.StatusCode
		switch {
		case code >= 500:
			return Verdict{InPlace: true}
		case code == http.StatusTooManyRequests, code == http.StatusUnauthorized:
			return Verdict{}
		}
		return Verdict{Permanent: true}
	}
	return Verdict{InPlace: true} // a connection error or timeout: no answer
}

// IsStatus reports whether err is a GitHub error response with that status.
func IsStatus(err error, code int) bool {
	var r *gh.ErrorResponse
	return errors.As(err, &r) && r.Response != nil && r.Response.StatusCode == code
}
