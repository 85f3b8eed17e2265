package github

import (
	"io"
	"net/http"
	"strconv"
	"strings"
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
