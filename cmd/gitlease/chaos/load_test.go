package chaos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gitlease/gitlease/webhook"
)

// delivery is one signed webhook delivery, sent (and redelivered) as is.
type delivery struct {
	ID        string
	Event     string
	Body      []byte
	Signature string
	// Number is the issue or pull request number: the subject is
	// github_issue:1296269#Number or github_pull_request:1296269#Number.
	Number int
	Pull   bool
}

// QualifiedID is the subject the delivery is about.
func (d delivery) QualifiedID() string {
	kind := "github_issue"
	if d.Pull {
		kind = "github_pull_request"
	}
	return fmt.Sprintf("%s:%d#%d", kind, repoID, d.Number)
}

// readFixture decodes a testdata payload, numbers kept as json.Number.
func readFixture(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "payloads", name))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

// sign makes a delivery of payload, signed with the webhook secret.
func sign(t *testing.T, id, event string, number int, pull bool, payload map[string]any) delivery {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return delivery{ID: id, Event: event, Body: body, Signature: webhook.Sign([]byte(webhookSecret), body),
		Number: number, Pull: pull}
}

// issueDelivery is an `issues` `opened` delivery for issue number of the
// fixtures' repository, with a fresh delivery ID.
func issueDelivery(t *testing.T, number int) delivery {
	t.Helper()
	m := readFixture(t, "issues-opened.json")
	issue := m["issue"].(map[string]any)
	issue["number"] = number
	issue["id"] = 3_000_000_000 + number
	issue["title"] = fmt.Sprintf("Chaos issue %d", number)
	issue["html_url"] = fmt.Sprintf("https://github.com/%s/issues/%d", repoFull, number)
	issue["url"] = fmt.Sprintf("https://api.github.com/repos/%s/issues/%d", repoFull, number)
	return sign(t, uuid.NewString(), "issues", number, false, m)
}

// pullDelivery is a `pull_request` `opened` delivery for pull request
// number from branch head (at headSHA) to main, with a fresh delivery ID.
func pullDelivery(t *testing.T, number int, head, headSHA string) delivery {
	t.Helper()
	m := readFixture(t, "pull_request-opened.json")
	m["number"] = number
	pr := m["pull_request"].(map[string]any)
	pr["number"] = number
	pr["id"] = 4_000_000_000 + number
	pr["title"] = fmt.Sprintf("Chaos pull request %d", number)
	pr["html_url"] = fmt.Sprintf("https://github.com/%s/pull/%d", repoFull, number)
	pr["url"] = fmt.Sprintf("https://api.github.com/repos/%s/pulls/%d", repoFull, number)
	h := pr["head"].(map[string]any)
	h["ref"], h["sha"], h["label"] = head, headSHA, repoOwner+":"+head
	return sign(t, uuid.NewString(), "pull_request", number, true, m)
}

// attempt is one HTTP request of the load.
type attempt struct {
	Start, End time.Time
	DeliveryID string
	Base       string // the serve it went to
	Status     int    // 0: no answer
	Err        string // transport error, when Status is 0
	Timeout    bool   // the client gave up waiting
}

// answer is a 2xx answer to a delivery.
type answer struct {
	Status int
	webhook.Response
}

// loadResult is what a load run saw.
type loadResult struct {
	mu       sync.Mutex
	answers  map[string][]answer // delivery ID -> every 2xx answer, in order
	failures map[string]string   // delivery ID -> why it never got a 2xx
	attempts []attempt
}

// newLoadResult returns an empty result.
func newLoadResult() *loadResult {
	return &loadResult{answers: map[string][]answer{}, failures: map[string]string{}}
}

// record adds one request.
func (r *loadResult) record(a attempt) {
	r.mu.Lock()
	r.attempts = append(r.attempts, a)
	r.mu.Unlock()
}

// Answers returns a copy of every 2xx answer by delivery ID.
func (r *loadResult) Answers() map[string][]answer {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]answer, len(r.answers))
	for k, v := range r.answers {
		out[k] = append([]answer(nil), v...)
	}
	return out
}

// Failures returns a copy of the deliveries that never got a 2xx, and why.
func (r *loadResult) Failures() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.failures))
	for k, v := range r.failures {
		out[k] = v
	}
	return out
}

// Attempts returns a copy of every request made so far.
func (r *loadResult) Attempts() []attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]attempt(nil), r.attempts...)
}

// answer is how the attempt was answered: its HTTP status, "timeout" or
// "transport error".
func (a attempt) answer() string {
	switch {
	case a.Timeout:
		return "timeout"
	case a.Status == 0:
		return "transport error"
	default:
		return strconv.Itoa(a.Status)
	}
}

// Summary counts the attempts by answer.
func (r *loadResult) Summary() map[string]int {
	out := map[string]int{}
	for _, a := range r.Attempts() {
		out[a.answer()]++
	}
	return out
}

// sender posts deliveries to whichever serve is current, redelivering as
// GitHub does after a transport error or a 5xx.
type sender struct {
	client *http.Client
	// base returns the current serve's base URL ("" while none listens).
	base func() string
	// retryFor bounds how long one delivery is redelivered.
	retryFor time.Duration
	res      *loadResult
	// inFlight counts requests sent and not yet answered.
	inFlight atomic.Int64
}

// newSender returns a sender to base() whose requests time out after
// timeout and whose deliveries are redelivered for at most retryFor.
func newSender(base func() string, timeout, retryFor time.Duration, res *loadResult) *sender {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	return &sender{client: &http.Client{Timeout: timeout, Transport: tr}, base: base, retryFor: retryFor, res: res}
}

// send delivers d until it is answered 2xx (recorded in the result), it
// gets an answer that redelivering cannot change (a 4xx, recorded as a
// failure), or retryFor has passed (a failure too).
func (s *sender) send(ctx context.Context, d delivery) {
	first := time.Now()
	for try := 0; ; try++ {
		status, resp, err := s.post(ctx, d)
		switch {
		case err == nil && status >= 200 && status < 300:
			s.res.mu.Lock()
			s.res.answers[d.ID] = append(s.res.answers[d.ID], answer{Status: status, Response: resp})
			s.res.mu.Unlock()
			return
		case err == nil && status < 500:
			s.fail(d, fmt.Sprintf("answered %d %+v", status, resp))
			return
		case ctx.Err() != nil:
			s.fail(d, "load stopped before a 2xx answer")
			return
		case time.Since(first) > s.retryFor:
			why := fmt.Sprintf("no 2xx within %s (last: status %d, %v)", s.retryFor, status, err)
			s.fail(d, why)
			return
		}
		wait := min(50*time.Millisecond<<min(try, 5), time.Second)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// fail records that d was given up on, and why.
func (s *sender) fail(d delivery, why string) {
	s.res.mu.Lock()
	s.res.failures[d.ID] = why
	s.res.mu.Unlock()
}

// post makes one request and records it as an attempt.
func (s *sender) post(ctx context.Context, d delivery) (int, webhook.Response, error) {
	a := attempt{Start: time.Now(), DeliveryID: d.ID}
	defer func() {
		a.End = time.Now()
		s.res.record(a)
	}()
	base := s.base()
	a.Base = base
	if base == "" {
		a.Err = "no serve listening"
		return 0, webhook.Response{}, errors.New(a.Err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/webhook", bytes.NewReader(d.Body))
	if err != nil {
		a.Err = err.Error()
		return 0, webhook.Response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/chaos")
	req.Header.Set(webhook.EventHeader, d.Event)
	req.Header.Set(webhook.DeliveryHeader, d.ID)
	req.Header.Set(webhook.SignatureHeader, d.Signature)
	s.inFlight.Add(1)
	resp, err := s.client.Do(req)
	s.inFlight.Add(-1)
	if err != nil {
		a.Err = err.Error()
		var ne interface{ Timeout() bool }
		a.Timeout = errors.As(err, &ne) && ne.Timeout()
		return 0, webhook.Response{}, err
	}
	defer resp.Body.Close()
	a.Status = resp.StatusCode
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		// The answer was cut off (the process died): as good as none.
		a.Status, a.Err = 0, "reading the answer: "+err.Error()
		return 0, webhook.Response{}, err
	}
	var out webhook.Response
	if a.Status < 300 {
		if err := json.Unmarshal(b, &out); err != nil {
			a.Status, a.Err = 0, "a 2xx answer that is not JSON: "+err.Error()
			return 0, out, errors.New(a.Err)
		}
	} else {
		_ = json.Unmarshal(b, &out)
	}
	return a.Status, out, nil
}

// waitInFlight waits until a request is in flight, for at most within, and
// reports whether one is.
func (s *sender) waitInFlight(within time.Duration) bool {
	deadline := time.Now().Add(within)
	for s.inFlight.Load() == 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Microsecond)
	}
	return true
}

// run sends ds, one every pace, from concurrency goroutines, until they
// are all sent or stop is closed (nil: never), and returns once each sent
// one has been answered 2xx or given up on. It returns the deliveries sent.
func (s *sender) run(ctx context.Context, ds []delivery, concurrency int, pace time.Duration, stop <-chan struct{}) []delivery {
	work := make(chan delivery)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range work {
				s.send(ctx, d)
			}
		}()
	}
	tick := time.NewTicker(pace)
	defer tick.Stop()
	var sent []delivery
feed:
	for _, d := range ds {
		select {
		case <-ctx.Done():
			break feed
		case <-stop:
			break feed
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			break feed
		case work <- d:
			sent = append(sent, d)
		}
	}
	close(work)
	wg.Wait()
	return sent
}

// currentURL is the base URL of whichever serve is current, shared between
// the test goroutine (which restarts serve) and the load.
type currentURL struct{ v atomic.Pointer[string] }

// Set makes base the current URL.
func (c *currentURL) Set(base string) { c.v.Store(&base) }

// Get returns the current URL ("" before the first Set).
func (c *currentURL) Get() string {
	if p := c.v.Load(); p != nil {
		return *p
	}
	return ""
}
