package webhook_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitlease/gitlease/webhook"
)

// unreadable is a body the intake must not read: reading it fails the test.
type unreadable struct {
	t    *testing.T
	read bool
	mu   sync.Mutex
}

func (u *unreadable) Read([]byte) (int, error) {
	u.mu.Lock()
	u.read = true
	u.mu.Unlock()
	return 0, io.EOF
}

// TestHandlerRefusesBeforeReading: each refusal docs/webhook.md places before the
// signature check is answered with its status without reading a byte of
// the body, in the spec's order.
func TestHandlerRefusesBeforeReading(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultOptions())
	good := webhook.Sign([]byte(testSecrets[0]), []byte("{}"))
	cases := []struct {
		name      string
		length    int64
		event     string
		delivery  string
		signature string
		want      int
	}{
		{"too large beats everything", webhook.MaxBody + 1, "", "", "", http.StatusRequestEntityTooLarge},
		{"missing event beats a missing signature", 2, "", "d-1", "", http.StatusBadRequest},
		{"missing delivery", 2, "issues", "", good, http.StatusBadRequest},
		{"missing signature", 2, "issues", "d-2", "", http.StatusUnauthorized},
		{"sha1 signature", 2, "issues", "d-3", "sha1=" + strings.Repeat("a", 40), http.StatusUnauthorized},
		{"short hex", 2, "issues", "d-4", "sha256=" + strings.Repeat("a", 63), http.StatusUnauthorized},
		{"long hex", 2, "issues", "d-5", "sha256=" + strings.Repeat("a", 65), http.StatusUnauthorized},
		{"not hex", 2, "issues", "d-6", "sha256=" + strings.Repeat("g", 64), http.StatusUnauthorized},
		{"upper-case prefix", 2, "issues", "d-7", "SHA256=" + strings.Repeat("a", 64), http.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := &unreadable{t: t}
			r := httptest.NewRequest(http.MethodPost, "/webhook", body)
			r.ContentLength = tc.length
			r.Header.Set("Content-Type", webhook.ContentTypeJSON)
			r.Header.Set(webhook.EventHeader, tc.event)
			r.Header.Set(webhook.DeliveryHeader, tc.delivery)
			if tc.signature != "" {
				r.Header.Set(webhook.SignatureHeader, tc.signature)
			}
			status, _ := serve(t, env.handler, r)
			if status != tc.want {
				t.Errorf("status %d, want %d", status, tc.want)
			}
			if body.read {
				t.Error("the body was read before the delivery was refused")
			}
		})
	}
	if n := env.count(t, "deliveries"); n != 0 {
		t.Errorf("%d deliveries stored, want none", n)
	}
}

// blockingBody is a body that gives first, then waits until release is
// closed, so a test can hold a request inside the intake with len(first)
// bytes of it read.
type blockingBody struct {
	first   []byte
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingBody) Read(p []byte) (int, error) {
	if len(b.first) > 0 {
		n := copy(p, b.first)
		b.first = b.first[n:]
		return n, nil
	}
	b.once.Do(func() { close(b.started) })
	<-b.release
	return 0, io.EOF
}

// TestHandlerInflightBudget: bodies count against MaxInflightBody by the
// bytes that arrived, not by their Content-Length: a request claiming the
// largest body costs nothing until its bytes come; a body whose bytes do
// not fit beside those held is answered 503 at once (never queued); once
// the held body is answered the budget is free again.
func TestHandlerInflightBudget(t *testing.T) {
	t.Parallel()
	opts := defaultOptions()
	opts.handler.MaxInflightBody = 1000
	env := newEnv(t, opts)
	sig := "sha256=" + strings.Repeat("0", 64)
	newReq := func(body io.Reader, length int64, delivery string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/webhook", body)
		r.ContentLength = length
		r.Header.Set("Content-Type", webhook.ContentTypeJSON)
		r.Header.Set(webhook.EventHeader, "issues")
		r.Header.Set(webhook.DeliveryHeader, delivery)
		r.Header.Set(webhook.SignatureHeader, sig)
		return r
	}
	held := &blockingBody{first: []byte(strings.Repeat(" ", 990)), started: make(chan struct{}), release: make(chan struct{})}
	done := make(chan int, 1)
	go func() {
		w := httptest.NewRecorder()
		env.handler.ServeHTTP(w, newReq(held, webhook.MaxBody, "held"))
		done <- w.Code
	}()
	<-held.started
	cases := []struct {
		name         string
		length, sent int
		want         int
	}{
		{"fits beside the held bytes", 10, 10, http.StatusUnauthorized},
		{"claims the largest body, sends little", webhook.MaxBody, 10, http.StatusUnauthorized},
		{"undeclared length, little sent", -1, 10, http.StatusUnauthorized},
		{"does not fit", 11, 11, http.StatusServiceUnavailable},
	}
	for _, tc := range cases {
		body := strings.NewReader(strings.Repeat(" ", tc.sent))
		if status, _ := serve(t, env.handler, newReq(body, int64(tc.length), "d-"+strings.ReplaceAll(tc.name, " ", "-"))); status != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, status, tc.want)
		}
	}
	close(held.release)
	// 401 (wrong signature), or 408 if this machine took over a second:
	// the held body then fell behind MinBodyRate.
	if status := <-done; status != http.StatusUnauthorized && status != http.StatusRequestTimeout {
		t.Errorf("held delivery: status %d, want 401", status)
	}
	if status, _ := serve(t, env.handler, newReq(strings.NewReader(strings.Repeat(" ", 1000)), -1, "after")); status != http.StatusUnauthorized {
		t.Errorf("after the held body was answered: status %d, want 401 (the budget is free again)", status)
	}
}

// TestHandlerCutsOffSlowSenders: over a real HTTP server, a sender that
// trickles its body and one that stalls after its headers are both
// answered 408 and disconnected a little after BodyRateGrace, long before
// the server's own read timeout; a body sent at once is read.
func TestHandlerCutsOffSlowSenders(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultOptions())
	srv := httptest.NewServer(env.handler)
	t.Cleanup(srv.Close)
	head := "POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: issues\r\n" +
		"X-GitHub-Delivery: slow\r\nX-Hub-Signature-256: sha256=" + strings.Repeat("0", 64) + "\r\nContent-Length: 1000000\r\n\r\n"
	for _, tc := range []struct {
		name    string
		trickle bool
	}{{"trickle", true}, {"stall", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			if _, err := io.WriteString(conn, head+"{"); err != nil {
				t.Fatal(err)
			}
			answer := make(chan string, 1)
			go func() {
				b, _ := io.ReadAll(conn) // until the server closes
				answer <- string(b)
			}()
			for {
				select {
				case got := <-answer:
					if !strings.HasPrefix(got, "HTTP/1.1 408") {
						t.Errorf("answer %q, want 408", got)
					}
					t.Logf("cut off after %v", time.Since(start).Round(time.Millisecond))
					return
				case <-time.After(100 * time.Millisecond):
				}
				if time.Since(start) > 20*time.Second {
					t.Fatal("the slow sender still held its connection after 20s")
				}
				if tc.trickle {
					_, _ = io.WriteString(conn, " ")
				}
			}
		})
	}
}

// TestHandlerCutsEchoedHeaders: a 200-character X-GitHub-Delivery is
// refused, and the answer echoes only its first 128 characters.
func TestHandlerCutsEchoedHeaders(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultOptions())
	long := strings.Repeat("d", 200)
	for _, signature := range []string{"", webhook.Sign([]byte(testSecrets[0]), []byte("{}"))} {
		r := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader("{}"))
		r.Header.Set("Content-Type", webhook.ContentTypeJSON)
		r.Header.Set(webhook.EventHeader, "issues")
		r.Header.Set(webhook.DeliveryHeader, long)
		if signature != "" {
			r.Header.Set(webhook.SignatureHeader, signature)
		}
		status, resp := serve(t, env.handler, r)
		if status != http.StatusBadRequest || resp.DeliveryID != long[:webhook.MaxEchoedHeader] {
			t.Errorf("signature %q: status %d, echoed delivery ID of %d characters; want 400 and 128", signature, status, len(resp.DeliveryID))
		}
	}
	if got := webhook.Echoable(strings.Repeat("é", 100)); len(got) != 128 {
		t.Errorf("Echoable cut 200 bytes of two-byte characters to %d bytes, want 128", len(got))
	}
}
