package githubtest_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/gitlease/gitlease/app/githubtest"
)

// receiver is a webhook endpoint that checks signatures and answers status.
type receiver struct {
	srv      *httptest.Server
	status   atomic.Int32
	mu       sync.Mutex
	bodies   map[string][]string // by X-GitHub-Delivery
	badSig   int
	received int
}

func newReceiver(t *testing.T, secret string) *receiver {
	rc := &receiver{bodies: map[string][]string{}}
	rc.status.Store(http.StatusAccepted)
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		rc.mu.Lock()
		rc.received++
		if r.Header.Get("X-Hub-Signature-256") != "sha256="+hex.EncodeToString(mac.Sum(nil)) || r.Header.Get("X-GitHub-Event") == "" {
			rc.badSig++
		}
		guid := r.Header.Get("X-GitHub-Delivery")
		rc.bodies[guid] = append(rc.bodies[guid], string(body))
		rc.mu.Unlock()
		w.WriteHeader(int(rc.status.Load()))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func TestHookDeliveryLog(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, false)
	rc := newReceiver(t, "whsec")
	s.SetWebhook(rc.srv.URL, "whsec")
	var clock atomic.Int64
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clock.Store(base.UnixNano())
	s.SetHookClock(func() time.Time { return time.Unix(0, clock.Load()) })
	payload := []byte(`{"action":"opened","installation":{"id":77},"repository":{"id":9001}}`)

	s.Deliver("issues", payload) // 4 days before "now" below: never listed
	clock.Store(base.Add(96 * time.Hour).UnixNano())
	ok := s.Deliver("issues", payload)
	rc.status.Store(http.StatusServiceUnavailable)
	failed := s.Deliver("pull_request", payload)
	refusedURL := httptest.NewServer(http.NotFoundHandler())
	refusedURL.Close()
	s.SetWebhook(refusedURL.URL, "whsec")
	refused := s.Deliver("issues", payload)

	if ok.Status != "OK" || ok.StatusCode != 202 || failed.Status != "Invalid HTTP Response: 503" || failed.StatusCode != 503 {
		t.Fatalf("attempts recorded %+v and %+v", ok, failed)
	}
	if refused.StatusCode != 0 || refused.Status != "failed to connect" {
		t.Fatalf("refused connection recorded %+v", refused)
	}
	if ok.InstallationID != 77 || ok.RepositoryID != 9001 || ok.Action != "opened" || ok.Redelivery {
		t.Fatalf("attempt facts %+v", ok)
	}

	c, _ := appClient(t, s, s.AppID, s.PrivateKeyPEM)
	ctx := context.Background()
	list := func(per int) (guids []string, pages int) {
		opts := &github.ListCursorOptions{PerPage: per}
		for {
			ds, resp, err := c.Apps.ListHookDeliveries(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, d := range ds {
				guids = append(guids, d.GetGUID())
			}
			if resp.Cursor == "" {
				return guids, pages
			}
			opts.Cursor = resp.Cursor
		}
	}
	// Newest first, one per page, and the 4-day-old attempt not at all.
	guids, pages := list(1)
	want := []string{refused.GUID, failed.GUID, ok.GUID}
	if pages != 3 || len(guids) != 3 || guids[0] != want[0] || guids[1] != want[1] || guids[2] != want[2] {
		t.Fatalf("listed %v in %d pages, want %v in 3", guids, pages, want)
	}
	if guids, _ := list(1000); len(guids) != 3 { // per_page is capped at 100, not refused
		t.Fatalf("per_page 1000 listed %v", guids)
	}

	// A redelivery: 202, then the same guid and payload again, marked.
	s.SetWebhook(rc.srv.URL, "whsec")
	rc.status.Store(http.StatusAccepted)
	_, _, err := c.Apps.RedeliverHookDelivery(ctx, failed.ID)
	var accepted *github.AcceptedError
	if !errors.As(err, &accepted) {
		t.Fatalf("redeliver: %v, want 202", err)
	}
	s.WaitRedeliveries()
	all := s.HookAttempts()
	last := all[len(all)-1]
	if last.GUID != failed.GUID || !last.Redelivery || last.Status != "OK" || last.Event != "pull_request" {
		t.Fatalf("redelivery recorded %+v", last)
	}
	rc.mu.Lock()
	bodies := rc.bodies[failed.GUID]
	bad := rc.badSig
	rc.mu.Unlock()
	if len(bodies) != 2 || bodies[0] != bodies[1] || bad != 0 {
		t.Fatalf("receiver saw %d bodies of the guid (%d badly signed)", len(bodies), bad)
	}

	// Too old: 422, and a violation (the client should have known).
	lenient := githubtest.New(t, githubtest.Lenient())
	lenient.SetHookClock(func() time.Time { return time.Unix(0, clock.Load()) })
	aged := lenient.AddHookAttempt(githubtest.HookAttempt{GUID: "g-old", Event: "issues", DeliveredAt: base, Status: "failed to connect"}, payload)
	lc, _ := appClient(t, lenient, lenient.AppID, lenient.PrivateKeyPEM)
	_, resp, err := lc.Apps.RedeliverHookDelivery(ctx, aged.ID)
	if resp == nil || resp.StatusCode != http.StatusUnprocessableEntity || len(lenient.Violations()) != 1 {
		t.Fatalf("redelivery of a 4-day-old attempt: %v, violations %v", err, lenient.Violations())
	}
	if _, resp, _ := lc.Apps.RedeliverHookDelivery(ctx, 999999); resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("redelivery of an unknown attempt answered %v", resp)
	}
}

func TestHookDeliveryTimeout(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, false)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	s.SetWebhook(slow.URL, "whsec")
	s.SetHookTimeout(50 * time.Millisecond)
	a := s.Deliver("issues", []byte(`{"action":"opened"}`))
	if a.StatusCode != 0 || a.Status != "timed out" {
		t.Fatalf("slow answer recorded %+v", a)
	}
}
