package githubtest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The App webhook's delivery log endpoints.
const (
	KindListHookDeliveries Kind = "list_hook_deliveries"    // GET /app/hook/deliveries
	KindRedeliverHook      Kind = "redeliver_hook_delivery" // POST /app/hook/deliveries/{delivery_id}/attempts
)

// HookRetention is how long GitHub keeps, lists and redelivers a webhook
// delivery attempt; EnterpriseHookRetention how long GitHub Enterprise
// Server does (the fake with Enterprise).
const (
	HookRetention           = 72 * time.Hour
	EnterpriseHookRetention = 7 * 24 * time.Hour
)

// hookRetention is this fake's delivery-log retention.
func (s *Server) hookRetention() time.Duration {
	if s.cfg.prefix != "" {
		return EnterpriseHookRetention
	}
	return HookRetention
}

// HookTimeout is how long GitHub waits for a webhook answer before it
// records the attempt as timed out (status code 0).
const HookTimeout = 10 * time.Second

// HookAttempt is one delivery attempt of the App's webhook, as GitHub's
// delivery log (GET /app/hook/deliveries) shows it.
type HookAttempt struct {
	ID          int64
	GUID        string // the X-GitHub-Delivery value, the same on every attempt
	DeliveredAt time.Time
	Redelivery  bool
	Duration    float64 // seconds
	// Status is "OK" for a 2xx answer, "Invalid HTTP Response: <code>"
	// for another answer, "failed to connect" or "timed out" (StatusCode 0)
	// when none came.
	Status         string
	StatusCode     int
	Event, Action  string
	InstallationID int64
	RepositoryID   int64
}

// hookLog is the App webhook's configuration and delivery log (guarded by
// Server.mu, except inflight).
type hookLog struct {
	url, secret string
	now         func() time.Time
	timeout     time.Duration
	attempts    []hookRecord // in completion order
	byID        map[int64]int
	inflight    sync.WaitGroup
	cleanup     bool
}

type hookRecord struct {
	HookAttempt
	payload []byte
}

func (s *Server) hookNow() time.Time {
	if s.hooks.now != nil {
		return s.hooks.now()
	}
	return time.Now()
}

// SetWebhook sets the App's webhook URL and secret: Deliver and
// redeliveries POST there, signed with secret (X-Hub-Signature-256).
func (s *Server) SetWebhook(url, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks.url, s.hooks.secret = url, secret
	if c, ok := s.tb.(interface{ Cleanup(func()) }); ok && !s.hooks.cleanup {
		// A test's fake waits at its end for redeliveries still being sent.
		s.hooks.cleanup = true
		c.Cleanup(s.WaitRedeliveries)
	}
}

// SetHookClock sets the clock that stamps delivery attempts and decides
// which are within the 3-day retention (time.Now when nil), so a test can
// make attempts days old.
func (s *Server) SetHookClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks.now = now
}

// SetHookTimeout sets how long a delivery waits for an answer
// (HookTimeout when 0).
func (s *Server) SetHookTimeout(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks.timeout = d
}

// Deliver sends a new delivery of event with payload to the webhook URL, as
// GitHub does (a new guid, signed, the X-GitHub-* headers), waits for the
// answer, records the attempt in the delivery log and returns it. A refused
// connection or a timeout is recorded with status code 0, not returned as
// an error.
func (s *Server) Deliver(event string, payload []byte) HookAttempt {
	return s.deliver(newGUID(), event, payload, false)
}

// AddHookAttempt records an attempt in the delivery log without sending
// anything, for filling a log quickly (benchmarks). The ID is assigned;
// DeliveredAt defaults to the hook clock's now. payload is what a
// redelivery of it sends.
func (s *Server) AddHookAttempt(a HookAttempt, payload []byte) HookAttempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	a.ID = s.newID()
	if a.DeliveredAt.IsZero() {
		a.DeliveredAt = s.hookNow()
	}
	s.recordHook(hookRecord{HookAttempt: a, payload: slices.Clone(payload)})
	return a
}

// HookAttempts returns every recorded attempt, oldest first, whatever its
// age.
func (s *Server) HookAttempts() []HookAttempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]HookAttempt, 0, len(s.hooks.attempts))
	for _, r := range s.hooks.attempts {
		out = append(out, r.HookAttempt)
	}
	slices.SortFunc(out, func(a, b HookAttempt) int { return compareInt(a.ID, b.ID) })
	return out
}

// RedeliveryRequests counts the redelivery requests received
// (POST /app/hook/deliveries/{id}/attempts, whatever their answer), by the
// guid of the attempt each named ("" for an unknown attempt).
func (s *Server) RedeliveryRequests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, r := range s.requests {
		if r.Kind != KindRedeliverHook {
			continue
		}
		id, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(r.Path, "/app/hook/deliveries/"), "/attempts"), 10, 64)
		guid := ""
		if i, ok := s.hooks.byID[id]; ok {
			guid = s.hooks.attempts[i].GUID
		}
		out[guid]++
	}
	return out
}

// WaitRedeliveries waits until every redelivery requested so far has been
// attempted and recorded (GitHub redelivers after it answers 202).
func (s *Server) WaitRedeliveries() { s.hooks.inflight.Wait() }

func (s *Server) recordHook(r hookRecord) {
	if s.hooks.byID == nil {
		s.hooks.byID = map[int64]int{}
	}
	s.hooks.byID[r.ID] = len(s.hooks.attempts)
	s.hooks.attempts = append(s.hooks.attempts, r)
}

func (s *Server) deliver(guid, event string, payload []byte, redelivery bool) HookAttempt {
	s.mu.Lock()
	a := HookAttempt{ID: s.newID(), GUID: guid, DeliveredAt: s.hookNow(), Redelivery: redelivery, Event: event}
	target, secret, timeout := s.hooks.url, s.hooks.secret, s.hooks.timeout
	appID := s.AppID
	s.mu.Unlock()
	if timeout == 0 {
		timeout = HookTimeout
	}
	var env struct {
		Action       string `json:"action"`
		Installation *struct {
			ID int64 `json:"id"`
		} `json:"installation"`
		Repository *struct {
			ID int64 `json:"id"`
		} `json:"repository"`
	}
	_ = json.Unmarshal(payload, &env) // a payload that is no object is sent all the same
	a.Action = env.Action
	if env.Installation != nil {
		a.InstallationID = env.Installation.ID
	}
	if env.Repository != nil {
		a.RepositoryID = env.Repository.ID
	}

	start := time.Now()
	a.StatusCode, a.Status = post(target, secret, appID, guid, event, payload, timeout)
	a.Duration = time.Since(start).Seconds()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.recordHook(hookRecord{HookAttempt: a, payload: slices.Clone(payload)})
	return a
}

// post sends one delivery and says what GitHub would record of it.
func post(target, secret string, appID int64, guid, event string, payload []byte, timeout time.Duration) (int, string) {
	if target == "" {
		return 0, "failed to connect"
	}
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(payload))
	if err != nil {
		return 0, "failed to connect"
	}
	mac256 := hmac.New(sha256.New, []byte(secret))
	mac256.Write(payload)
	mac1 := hmac.New(sha1.New, []byte(secret))
	mac1.Write(payload)
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/fake")
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Delivery", guid)
	h.Set("X-GitHub-Hook-ID", "1")
	h.Set("X-GitHub-Hook-Installation-Target-ID", strconv.FormatInt(appID, 10))
	h.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac256.Sum(nil)))
	h.Set("X-Hub-Signature", "sha1="+hex.EncodeToString(mac1.Sum(nil)))
	client := &http.Client{Timeout: timeout}
	resp, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) && uerr.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, "timed out"
		}
		return 0, "failed to connect"
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)); err != nil {
		return 0, "timed out"
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp.StatusCode, "OK"
	}
	return resp.StatusCode, fmt.Sprintf("Invalid HTTP Response: %d", resp.StatusCode)
}

func newGUID() string {
	r := strings.ToLower(randomString(32))
	return r[:8] + "-" + r[8:12] + "-" + r[12:16] + "-" + r[16:20] + "-" + r[20:32]
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func hookJSON(a HookAttempt) map[string]any {
	m := map[string]any{
		"id": a.ID, "guid": a.GUID, "delivered_at": ts(a.DeliveredAt), "redelivery": a.Redelivery,
		"duration": a.Duration, "status": a.Status, "status_code": a.StatusCode, "event": a.Event,
		"action": nil, "installation_id": nil, "repository_id": nil, "throttled_at": nil,
	}
	if a.Action != "" {
		m["action"] = a.Action
	}
	if a.InstallationID != 0 {
		m["installation_id"] = a.InstallationID
	}
	if a.RepositoryID != 0 {
		m["repository_id"] = a.RepositoryID
	}
	return m
}

// handleListHookDeliveries serves GET /app/hook/deliveries: the attempts of
// the last three days, newest first, per_page (default 30, at most 100) at
// a time, the next page named by an opaque cursor in the Link header.
func (s *Server) handleListHookDeliveries(c *call) response {
	q := c.r.URL.Query()
	per := 30
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		per = min(v, 100)
	}
	before := int64(-1) // the cursor: list attempts with a smaller ID
	if cur := q.Get("cursor"); cur != "" {
		id, err := strconv.ParseInt(strings.TrimPrefix(cur, "v1_"), 10, 64)
		if !strings.HasPrefix(cur, "v1_") || err != nil {
			c.violatef("cursor %q was not given by GitHub", cur)
			return c.fail(http.StatusBadRequest, "Bad request: invalid cursor")
		}
		before = id
	}
	status := q.Get("status")
	oldest := s.hookNow().Add(-s.hookRetention())
	visible := make([]HookAttempt, 0, len(s.hooks.attempts))
	for _, r := range s.hooks.attempts {
		a := r.HookAttempt
		if a.DeliveredAt.Before(oldest) || (before >= 0 && a.ID >= before) {
			continue
		}
		// GitHub's status filter knows only HTTP status codes: a
		// connection failure (status code 0) is neither.
		ok := a.Status == "OK"
		if (status == "success" && !ok) || (status == "failure" && (a.StatusCode < 400 || a.StatusCode > 599)) {
			continue
		}
		visible = append(visible, a)
	}
	slices.SortFunc(visible, func(a, b HookAttempt) int { return compareInt(b.ID, a.ID) })
	out := make([]map[string]any, 0, per)
	for _, a := range visible[:min(per, len(visible))] {
		out = append(out, hookJSON(a))
	}
	res := response{status: http.StatusOK, body: out}
	if len(visible) > per {
		q2 := url.Values{}
		q2.Set("per_page", strconv.Itoa(per))
		q2.Set("cursor", "v1_"+strconv.FormatInt(visible[per-1].ID, 10))
		if status != "" {
			q2.Set("status", status)
		}
		res.header = map[string]string{"Link": fmt.Sprintf("<%s%s?%s>; rel=\"next\"", s.base, c.r.URL.Path, q2.Encode())}
	}
	return res
}

// handleRedeliverHook serves POST /app/hook/deliveries/{delivery_id}/attempts:
// 202, then (in the background, as GitHub does) a new attempt of the same
// guid and payload with redelivery true; 404 for an unknown attempt, 422
// for one older than the retention.
func (s *Server) handleRedeliverHook(c *call) response {
	id, err := strconv.ParseInt(c.r.PathValue("delivery_id"), 10, 64)
	i, ok := s.hooks.byID[id]
	if err != nil || !ok {
		return c.notFound()
	}
	r := s.hooks.attempts[i]
	if retention := s.hookRetention(); r.DeliveredAt.Before(s.hookNow().Add(-retention)) {
		c.violatef("redelivery of attempt %d, delivered %s: older than GitHub's %s retention", id, ts(r.DeliveredAt), retention)
		return c.fail(http.StatusUnprocessableEntity, fmt.Sprintf("Validation Failed: The delivery is older than %d days and cannot be redelivered", retention/(24*time.Hour)))
	}
	s.hooks.inflight.Add(1)
	go func() {
		defer s.hooks.inflight.Done()
		s.deliver(r.GUID, r.Event, r.payload, true)
	}()
	return response{status: http.StatusAccepted, body: map[string]any{}}
}
