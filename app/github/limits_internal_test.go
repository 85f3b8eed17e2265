package github

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestLimitOf(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	reset := strconv.FormatInt(now.Add(90*time.Second).Unix(), 10)
	for _, tc := range []struct {
		name   string
		status int
		header map[string]string
		body   string
		wait   time.Duration // 0: no limit
		reason string
	}{
		{"primary 403", 403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}, `{"message":"API rate limit exceeded"}`, 90*time.Second + resetMargin, "primary"},
		{"primary 429", 429, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}, ``, 90*time.Second + resetMargin, "primary"},
		{"last call spent on a 200", 200, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}, `{}`, 90*time.Second + resetMargin, "primary"},
		{"secondary with Retry-After", 403, map[string]string{"Retry-After": "7", "X-RateLimit-Remaining": "4000", "X-RateLimit-Reset": reset}, `{}`, 7 * time.Second, "secondary"},
		{"secondary 429 with Retry-After", 429, map[string]string{"Retry-After": "3"}, ``, 3 * time.Second, "secondary"},
		{"secondary message without Retry-After", 403, map[string]string{"X-RateLimit-Remaining": "4000", "X-RateLimit-Reset": reset}, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`, time.Minute, "secondary"},
		{"permission 403", 403, map[string]string{"X-RateLimit-Remaining": "4000", "X-RateLimit-Reset": reset}, `{"message":"Resource not accessible by integration"}`, 0, ""},
		{"server error", 502, map[string]string{"Retry-After": "5"}, `{"message":"Server Error"}`, 0, ""},
		{"plenty left", 200, map[string]string{"X-RateLimit-Remaining": "12", "X-RateLimit-Reset": reset}, `{}`, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tc.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(tc.body))}
			for k, v := range tc.header {
				resp.Header.Set(k, v)
			}
			until, reason := limitOf(resp, now)
			if tc.wait == 0 {
				if !until.IsZero() {
					t.Fatalf("limit until %v, want none", until)
				}
			} else if got := until.Sub(now); got != tc.wait || reason != tc.reason {
				t.Fatalf("limit %v (%s), want %v (%s)", got, reason, tc.wait, tc.reason)
			}
			if b, _ := io.ReadAll(resp.Body); string(b) != tc.body {
				t.Fatalf("body after limitOf = %q, want it intact", b)
			}
		})
	}
}

// FuzzLimitOf feeds GitHub's limit headers and bodies of any shape: limitOf
// never panics, never sets a limit in the past relative to now for a
// Retry-After, and leaves the body readable.
func FuzzLimitOf(f *testing.F) {
	f.Add(403, "0", "1700000090", "", `{"message":"API rate limit exceeded"}`)
	f.Add(429, "", "", "5", ``)
	f.Add(403, "10", "x", "-1", `secondary rate limit`)
	f.Fuzz(func(t *testing.T, status int, remaining, reset, retryAfter, body string) {
		resp := &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
		resp.Header.Set("X-RateLimit-Remaining", remaining)
		resp.Header.Set("X-RateLimit-Reset", reset)
		resp.Header.Set("Retry-After", retryAfter)
		now := time.Unix(1_700_000_000, 0)
		until, _ := limitOf(resp, now)
		if retryAfter != "" && !until.IsZero() && until.Before(now) && remaining != "0" {
			t.Fatalf("Retry-After %q gave a limit in the past: %v", retryAfter, until)
		}
		if b, _ := io.ReadAll(resp.Body); len(body) <= 64<<10 && string(b) != body {
			t.Fatalf("body changed: %q", b)
		}
	})
}

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestYieldingWritesNeverQueue: a yielding write (a check run's progress)
// goes only when its credential's writes are idle with pacing to spare; it
// is refused at once, calling nothing, while another write runs or waits,
// once the burst is down to its last write, and while a limit holds; and
// it never delays the ordinary write behind it.
func TestYieldingWritesNeverQueue(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var calls atomic.Int32
	l, err := newLimiter(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		if r.Header.Get("X-Block") != "" {
			<-release
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}"))}, nil
	}), 1, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := func(ctx context.Context, block bool) *http.Request {
		r, _ := http.NewRequestWithContext(ctx, http.MethodPatch, "https://api.github.test/x", nil)
		if block {
			r.Header.Set("X-Block", "1")
		}
		return r
	}
	yield := Yielding(context.Background())
	do := func(r *http.Request) error {
		resp, err := l.RoundTrip(r)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := do(req(yield, false)); err != nil {
		t.Fatalf("yielding write on idle writes: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- do(req(context.Background(), true)) }()
	for l.credential("anonymous", 0).waiting.Load() != 0 || len(l.credential("anonymous", 0).writes) == 0 {
		time.Sleep(time.Millisecond) // the blocking write holds the slot
	}
	if err := do(req(yield, false)); !errors.Is(err, ErrYielded) {
		t.Errorf("yielding write while another runs: %v, want ErrYielded", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Burst of 5: two spent; two more leave one, which a yielding write
	// leaves to others.
	for range 2 {
		if err := do(req(context.Background(), false)); err != nil {
			t.Fatal(err)
		}
	}
	before := calls.Load()
	if err := do(req(yield, false)); !errors.Is(err, ErrYielded) || calls.Load() != before {
		t.Errorf("yielding write with one write of pacing left: %v (%d calls made)", err, calls.Load()-before)
	}
	// The write it left is there for the ordinary write after it.
	if c := l.credential("anonymous", 0); c.pace.TokensAt(time.Now()) < 1 {
		t.Errorf("pacing holds %v writes after a yielded write, want the one it left", c.pace.TokensAt(time.Now()))
	}
	if err := do(req(context.Background(), false)); err != nil {
		t.Error(err)
	}
	c := l.credential("anonymous", 0)
	c.mu.Lock()
	c.until = time.Now().Add(time.Hour)
	c.mu.Unlock()
	time.Sleep(2100 * time.Millisecond) // pacing refills two writes
	if err := do(req(yield, false)); !errors.Is(err, ErrYielded) {
		t.Errorf("yielding write under a rate limit: %v, want ErrYielded", err)
	}
}
