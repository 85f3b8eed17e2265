package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"
)

// TestClassify pins the one reading of a GitHub error that Retry (in
// place) and the outbox sender (later) both act on.
func TestClassify(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	status := func(code int) error {
		return fmt.Errorf("call: %w", &gh.ErrorResponse{Response: &http.Response{StatusCode: code, Request: &http.Request{Method: "POST"}}})
	}
	reset := now.Add(time.Minute)
	wait := 30 * time.Second
	for _, tc := range []struct {
		name string
		err  error
		want Verdict
	}{
		{"no answer", errors.New("connection reset"), Verdict{InPlace: true}},
		{"timeout", context.DeadlineExceeded, Verdict{InPlace: true}},
		{"cancelled", context.Canceled, Verdict{}},
		{"502", status(502), Verdict{InPlace: true}},
		{"422", status(422), Verdict{Permanent: true}},
		{"404", status(404), Verdict{Permanent: true}},
		{"401", status(401), Verdict{}},
		{"429", status(429), Verdict{}},
		{"permanent", &PermanentError{Err: status(502)}, Verdict{Permanent: true}},
		{"limited", fmt.Errorf("get: %w", &LimitedError{Until: reset}), Verdict{Until: reset}},
		{"primary", &gh.RateLimitError{Rate: gh.Rate{Reset: gh.Timestamp{Time: reset}}}, Verdict{Until: reset.Add(resetMargin)}},
		{"secondary", &gh.AbuseRateLimitError{RetryAfter: &wait}, Verdict{Until: now.Add(wait)}},
		{"secondary without Retry-After", &gh.AbuseRateLimitError{}, Verdict{Until: now.Add(secondaryDefault)}},
	} {
		if got := Classify(tc.err, now); got != tc.want {
			t.Errorf("%s: Classify = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
