// Package webhooktest delivers signed GitHub webhooks to a handler, for
// tests of the packages that sit behind the intake. It is imported only by
// tests.
package webhooktest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gitlease/gitlease/webhook"
)

// readFixture reads testdata/payloads/<name> from the repository root.
func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "testdata", "payloads", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Deliver posts the fixture, edited by fn when not nil, to h as GitHub
// would (signed with secret) and returns the decoded answer.
func Deliver(t testing.TB, h http.Handler, secret, event, id, fixture string, fn func(m map[string]any)) webhook.Response {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readFixture(t, fixture), &m); err != nil {
		t.Fatal(err)
	}
	if fn != nil {
		fn(m)
	}
	body, _ := json.Marshal(m)
	req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", webhook.Sign([]byte(secret), body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var resp webhook.Response
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatalf("answer %d %q: %v", rec.Code, rec.Body.String(), err)
	}
	return resp
}
