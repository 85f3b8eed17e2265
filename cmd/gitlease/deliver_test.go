package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

const deliverTestSecret = "deliver-test-secret"

// TestDeliver sends fixtures with gitlease deliver to the real intake on
// its own database.
func TestDeliver(t *testing.T) {
	pool := dbtest.New(t)
	verifier, err := webhook.NewVerifier(deliverTestSecret)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := webhook.NewMapper(nil, webhook.MapperConfig{BranchPrefix: "gitlease/"})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := webhook.NewHandler(queue.NewStore(pool, queue.Config{}), verifier, mapper, logger, webhook.HandlerConfig{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		secret string // GITHUB_WEBHOOK_SECRET, if not deliverTestSecret
	}{
		{name: "issue", code: 0, stdout: []string{"HTTP 202 Accepted", `"outcome":"enqueued"`, `"delivery_id":"deliver-1"`},
			args: []string{"--event", "issues", "--delivery", "deliver-1", "../../testdata/payloads/issues-opened.json"}},
		{name: "redelivery", code: 0, stdout: []string{"HTTP 200 OK", `"outcome":"replay"`},
			args: []string{"--event", "issues", "--delivery", "deliver-1", "../../testdata/payloads/issues-opened.json"}},
		{name: "form-encoded, flags after the file", code: 0, stdout: []string{"HTTP 202 Accepted", `"qualified_id":"github_pull_request:1296269#1348"`},
			args: []string{"../../testdata/payloads/pull_request-opened.json", "--event", "pull_request", "--content-type", "form"}},
		{name: "same ID, other body", code: 1, stdout: []string{"HTTP 409 Conflict", `"outcome":"idempotency_conflict"`},
			args: []string{"--event", "issues", "--delivery", "deliver-1", "../../testdata/payloads/issues-reopened.json"}},
		{name: "wrong secret", code: 1, stdout: []string{"HTTP 401 Unauthorized"}, secret: "nope-nope-nope-nope",
			args: []string{"--event", "ping", "../../testdata/payloads/ping.json"}},
		{name: "short secret", code: 2, secret: "fifteen-chars-x",
			args: []string{"--event", "ping", "../../testdata/payloads/ping.json"}},
		{name: "secret flag", code: 2, args: []string{"--event", "ping", "--secret", deliverTestSecret, "../../testdata/payloads/ping.json"}},
		{name: "no event", code: 2, args: []string{"../../testdata/payloads/ping.json"}},
		{name: "no file", code: 2, args: []string{"--event", "ping"}},
		{name: "bad content type", code: 2, args: []string{"--event", "ping", "--content-type", "xml", "../../testdata/payloads/ping.json"}},
		{name: "missing file", code: 1, args: []string{"--event", "ping", "no-such-file.json"}},
	}
	for _, tc := range tests {
		// Sequential: the redelivery and the conflict follow the first.
		var stdout, stderr bytes.Buffer
		secret := deliverTestSecret
		if tc.secret != "" {
			secret = tc.secret
		}
		t.Setenv("GITHUB_WEBHOOK_SECRET", secret)
		args := append([]string{"deliver", "--url", srv.URL + "/webhook"}, tc.args...)
		code := run(args, strings.NewReader(""), &stdout, &stderr)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d; stdout %q stderr %q", tc.name, code, tc.code, stdout.String(), stderr.String())
		}
		for _, want := range tc.stdout {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("%s: stdout %q lacks %q", tc.name, stdout.String(), want)
			}
		}
	}
}

// TestDeliverHeaders: deliver sends what GitHub sends, signed with the
// first secret of GITHUB_WEBHOOK_SECRET.
func TestDeliverHeaders(t *testing.T) {
	t.Setenv("GITHUB_WEBHOOK_SECRET", "first-0123456789, second-0123456789")
	want, err := os.ReadFile("../../testdata/payloads/ping.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range []bool{false, true} {
		var got *http.Request
		var body []byte
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = r
			body, _ = io.ReadAll(r.Body)
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, `{"outcome":"ignored"}`)
		}))
		args := []string{"deliver", "--event", "ping", "--url", srv.URL + "/webhook", "../../testdata/payloads/ping.json"}
		if form {
			args = append(args, "--content-type", "form")
		}
		var stdout, stderr bytes.Buffer
		if code := run(args, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s %s", code, stdout.String(), stderr.String())
		}
		srv.Close()
		if got.Method != http.MethodPost || got.URL.Path != "/webhook" || got.Header.Get("X-GitHub-Event") != "ping" ||
			got.Header.Get("User-Agent") != "GitHub-Hookshot/gitlease" || len(got.Header.Get("X-GitHub-Delivery")) != 36 {
			t.Errorf("request %s %s headers %v", got.Method, got.URL, got.Header)
		}
		if sig := got.Header.Get("X-Hub-Signature-256"); sig != webhook.Sign([]byte("first-0123456789"), body) {
			t.Errorf("signature %s is not the body's under the first secret", sig)
		}
		payload, ct := body, "application/json"
		if form {
			ct = "application/x-www-form-urlencoded"
			v, err := url.ParseQuery(string(body))
			if err != nil {
				t.Fatal(err)
			}
			payload = []byte(v.Get("payload"))
		}
		if got.Header.Get("Content-Type") != ct || !bytes.Equal(payload, want) {
			t.Errorf("content type %s, payload %d bytes; want %s and the file's %d", got.Header.Get("Content-Type"), len(payload), ct, len(want))
		}
		if !strings.HasPrefix(stdout.String(), "HTTP 200 OK\n{\"outcome\":\"ignored\"}\n") {
			t.Errorf("stdout %q", stdout.String())
		}
	}
}
