package github

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v5"
	gh "github.com/google/go-github/v66/github"
)

// Retries is how a GitHub call is retried in place after a transient
// failure (a 5xx, a connection error, a timeout): up to Tries more times,
// the first pause near Initial, doubling, jittered by half either way.
// backoff/v5 is the one backoff helper of the GitHub side: the sender's
// row-level backoff uses it too (rowBackoff).
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

func (r Retries) backOff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval: r.Initial, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: 8 * r.Initial,
	}
}

// retryCall runs call, and again after each transient failure while
// retries are left. attempt counts from 0; an attempt after a failure whose
// answer may have been lost (lost) must look before it creates. It returns
// call's last error; a rate limit, a permanent 4xx and ctx's end stop it
// at once. Every attempt after the first follows a transient failure, so
// lost is attempt > 0.
func retryCall[T any](ctx context.Context, r Retries, call func(attempt int, lost bool) (T, error)) (T, error) {
	r.defaults()
	attempt := 0
	return backoff.Retry(ctx, func() (T, error) {
		// Any transient failure may follow an applied write (a gateway
		// answering 502 for a backend that did the work, a lost answer).
		v, err := call(attempt, attempt > 0)
		attempt++
		if err != nil && !transient(err) {
			return v, backoff.Permanent(err)
		}
		return v, err
	}, backoff.WithBackOff(r.backOff()), backoff.WithMaxTries(r.Tries+1))
}

// transient reports whether err is a failure worth retrying in place: a
// GitHub 5xx, or no answer at all. Rate limits are not: nothing may call
// before they lift.
func transient(err error) bool {
	var (
		limited  *LimitedError
		rate     *gh.RateLimitError
		abuse    *gh.AbuseRateLimitError
		perm     *permanentError
		response *gh.ErrorResponse
	)
	switch {
	case errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &limited), errors.As(err, &rate), errors.As(err, &abuse), errors.As(err, &perm):
		return false
	case errors.As(err, &response) && response.Response != nil:
		return response.Response.StatusCode >= 500
	}
	return true // a connection error or timeout: no answer
}
