package github

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// answering answers every request 201 with GitHub's budget headers.
type answering struct{}

func (answering) RoundTrip(r *http.Request) (*http.Response, error) {
	h := http.Header{}
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "4321")
	h.Set("X-RateLimit-Reset", "1700003600")
	return &http.Response{StatusCode: http.StatusCreated, Header: h, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

// budgetLog records what the limiter tells its BudgetRecorder.
type budgetLog struct {
	mu  sync.Mutex
	got []Budget
}

func (b *budgetLog) RecordBudget(_ context.Context, bud Budget) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, bud)
}

func (b *budgetLog) last() Budget {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.got[len(b.got)-1]
}

// TestContentRequestsArePacedAhead: an installation's content-creating
// requests stay within 80 in any minute and contentPerHour in any hour,
// sliding; the next one past either is not sent but refused with the time
// it may start, which is recorded as the installation's limit. Updates (a
// PATCH of a check run) and reads are not counted, and the App's JWT is
// not paced.
func TestContentRequestsArePacedAhead(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	now := start
	budgets := &budgetLog{}
	l, err := newLimiter(answering{}, 0, 100, budgets)
	if err != nil {
		t.Fatal(err)
	}
	l.now = func() time.Time { return now }
	call := func(method, path string, inst int64) error {
		r, _ := http.NewRequest(method, "https://api.github.com"+path, nil)
		r.Header.Set("Authorization", "token ghs_x")
		if inst != 0 {
			r = r.WithContext(context.WithValue(r.Context(), installationKey{}, inst))
		} else {
			r.Header.Set("Authorization", "Bearer jwt")
		}
		resp, err := l.RoundTrip(r)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	refused := func(method, path string, inst int64) time.Time {
		t.Helper()
		var le *LimitedError
		if err := call(method, path, inst); !errors.As(err, &le) || le.Reason != "content" {
			t.Fatalf("%s %s at +%v: %v, want a content limit", method, path, now.Sub(start), err)
		}
		return le.Until
	}
	// 80 at once: the minute's window is full.
	for i := range 80 {
		if err := call(http.MethodPost, "/repos/o/r/check-runs", 7); err != nil {
			t.Fatalf("content request %d: %v", i, err)
		}
	}
	if until := refused(http.MethodPost, "/repos/o/r/git/refs", 7); !until.Equal(start.Add(time.Minute)) {
		t.Fatalf("81st content request may start at +%v, want +1m", until.Sub(start))
	}
	if b := budgets.last(); b.InstallationID != 7 || !b.LimitedUntil.Equal(start.Add(time.Minute)) || b.Reason != "content" {
		t.Fatalf("recorded %+v, want installation 7 limited until +1m for content", b)
	}
	// Not content: a check run's update, a read, another installation, the App.
	for _, c := range []struct {
		method, path string
		inst         int64
	}{{http.MethodPatch, "/repos/o/r/check-runs/1", 7}, {http.MethodGet, "/repos/o/r", 7},
		{http.MethodPost, "/repos/o/r/pulls", 8}, {http.MethodPost, "/app/installations/7/access_tokens", 0}} {
		if err := call(c.method, c.path, c.inst); err != nil {
			t.Fatalf("%s %s as %d: %v", c.method, c.path, c.inst, err)
		}
	}
	// The minute slides: 20 more fit the hour.
	now = start.Add(time.Minute)
	for i := range 20 {
		if err := call(http.MethodPost, "/repos/o/r/issues/1/comments", 7); err != nil {
			t.Fatalf("content request %d after a minute: %v", 80+i, err)
		}
	}
	if until := refused(http.MethodPost, "/repos/o/r/pulls", 7); !until.Equal(start.Add(time.Hour)) {
		t.Fatalf("101st content request may start at +%v, want +1h", until.Sub(start))
	}
	now = start.Add(time.Hour)
	if err := call(http.MethodPost, "/repos/o/r/git/commits", 7); err != nil {
		t.Fatalf("content request after the hour: %v", err)
	}
	if b := budgets.last(); b.Remaining == nil || *b.Remaining != 4321 || b.Limit == nil || *b.Limit != 5000 || b.Reset == nil || b.Reset.Unix() != 1700003600 {
		t.Fatalf("recorded budget %+v, want GitHub's headers", b)
	}
}

func TestContentCreating(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"POST", "/repos/o/r/git/commits", true}, {"POST", "/repos/o/r/git/refs", true}, {"POST", "/repos/o/r/pulls", true},
		{"POST", "/repos/o/r/check-runs", true}, {"POST", "/repos/o/r/issues/3/comments", true}, {"POST", "/repos/o/r/issues", true},
		{"PATCH", "/repos/o/r/check-runs/9", false}, {"POST", "/app/installations/1/access_tokens", false},
		{"DELETE", "/installation/token", false}, {"GET", "/repos/o/r/pulls", false}, {"POST", "/repos/o/r/pulls/3/requested_reviewers", false},
	} {
		if got := contentCreating(c.method, c.path); got != c.want {
			t.Errorf("contentCreating(%s %s) = %v, want %v", c.method, c.path, got, c.want)
		}
	}
}
