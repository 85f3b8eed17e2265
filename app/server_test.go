package app_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gitlease/gitlease/app"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/queue/rpc"
)

const token = "s3cret-token"

func newServer(t *testing.T, tok string) *httptest.Server {
	t.Helper()
	pool := dbtest.New(t)
	h := rpc.NewHandler(queue.NewStore(pool, queue.Config{}), "test", nil)
	srv := httptest.NewServer(app.NewServer(app.ServerConfig{RPCToken: app.Secret(tok)}, pool, h, nil))
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url, auth, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRPCOverHTTP is the /rpc contract: bearer token, JSON-RPC 2.0 single
// and batch requests, errors inside HTTP 200, 204 for notifications only.
func TestRPCOverHTTP(t *testing.T) {
	t.Parallel()
	srv := newServer(t, token)
	url := srv.URL + "/rpc"
	bearer := "Bearer " + token
	stats := `{"jsonrpc":"2.0","id":1,"method":"queue/stats"}`
	cases := []struct {
		name, auth, body string
		status           int
		want             string // substring of the body
	}{
		{"no token", "", stats, 401, "bearer token"},
		{"wrong token", "Bearer nope", stats, 401, "bearer token"},
		{"basic auth", "Basic " + token, stats, 401, "bearer token"},
		{"single request", bearer, stats, 200, `{"jsonrpc":"2.0","id":1,"result":{"total":0,"pending":0,"assigned":0,"held":0,"deferred":0}}`},
		{"string id", bearer, `{"jsonrpc":"2.0","id":"a","method":"$/ping"}`, 200, `{"jsonrpc":"2.0","id":"a","result":{}}`},
		{"batch", bearer, `[` + stats + `,{"jsonrpc":"2.0","id":2,"method":"health/check"},{"jsonrpc":"2.0","method":"initialized"}]`, 200,
			`[{"jsonrpc":"2.0","id":1,"result":{"total":0,"pending":0,"assigned":0,"held":0,"deferred":0}},{"jsonrpc":"2.0","id":2,"result":{"status":"healthy"}}]`},
		{"notification only", bearer, `{"jsonrpc":"2.0","method":"queue/stats"}`, 204, ""},
		{"batch of notifications", bearer, `[{"jsonrpc":"2.0","method":"queue/stats"}]`, 204, ""},
		{"parse error", bearer, `{"jsonrpc":`, 200, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700`},
		{"empty batch", bearer, `[]`, 200, `"code":-32600`},
		{"missing jsonrpc", bearer, `{"id":3,"method":"queue/stats"}`, 200, `{"jsonrpc":"2.0","id":3,"error":{"code":-32600`},
		{"wrong jsonrpc", bearer, `{"jsonrpc":"1.0","id":3,"method":"queue/stats"}`, 200, `"code":-32600`},
		{"not an object", bearer, `42`, 200, `"code":-32600`},
		{"unknown method", bearer, `{"jsonrpc":"2.0","id":4,"method":"queue/v3/enqueue","params":{}}`, 200,
			`{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"method 'queue/v3/enqueue' not implemented by gitlease"}}`},
		{"missing params", bearer, `{"jsonrpc":"2.0","id":5,"method":"queue/v2/lease"}`, 200, `"code":-32602`},
		{"unknown field", bearer, `{"jsonrpc":"2.0","id":6,"method":"queue/v2/lease","params":{"max":1,"owner_id":"o","workflow_ids":["w"],"surprise":1}}`, 200,
			"unknown field `surprise`"},
		{"negative max", bearer, `{"jsonrpc":"2.0","id":7,"method":"queue/v2/lease","params":{"max":-1,"owner_id":"o","workflow_ids":[]}}`, 200, `"code":-32602`},
		{"unknown entry", bearer, `{"jsonrpc":"2.0","id":8,"method":"gitlease/entry/get","params":{"entry_id":"3f6c1d2e-8a4b-4c9d-b1e7-5a2f9c0d7e18"}}`, 200, `"code":-32201`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, url, tc.auth, tc.body)
			if status != tc.status || !strings.Contains(body, tc.want) {
				t.Fatalf("got %d %s; want %d containing %s", status, body, tc.status, tc.want)
			}
		})
	}
}

func TestRPCDisabledWithoutToken(t *testing.T) {
	t.Parallel()
	srv := newServer(t, "")
	if status, _ := post(t, srv.URL+"/rpc", "Bearer ", `{"jsonrpc":"2.0","id":1,"method":"queue/stats"}`); status != http.StatusNotFound {
		t.Fatalf("/rpc without a configured token answered %d, want 404", status)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	srv := newServer(t, token)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s = %d, want 200", path, resp.StatusCode)
		}
	}
}

// TestRPCWorkerToken: the worker token passes the methods a worker needs
// and is refused 403 for every other, alone, in a batch beside allowed
// ones, or as a notification; the full token passes everything.
func TestRPCWorkerToken(t *testing.T) {
	t.Parallel()
	const full, worker = "full-token-0123456789", "worker-token-0123456789"
	pool := dbtest.New(t)
	h := rpc.NewHandler(queue.NewStore(pool, queue.Config{}), "test", nil)
	srv := httptest.NewServer(app.NewServer(app.ServerConfig{RPCToken: full, RPCWorkerToken: worker}, pool, h, nil))
	t.Cleanup(srv.Close)
	call := func(m string) string { return `{"jsonrpc":"2.0","id":1,"method":"` + m + `","params":{}}` }
	allowed := []string{rpc.MethodV2Lease, rpc.MethodV2Renew, rpc.MethodV2Recover, rpc.MethodV2Completion, rpc.MethodCompletion,
		rpc.MethodV2ReleasePending, rpc.MethodEntryGet, rpc.MethodStats, rpc.MethodHealthCheck}
	for _, m := range allowed {
		if code, body := post(t, srv.URL+"/rpc", "Bearer "+worker, call(m)); code != http.StatusOK {
			t.Errorf("worker token, %s: %d %s, want 200", m, code, body)
		}
	}
	for _, m := range rpc.Methods() {
		if rpc.WorkerMethod(m) {
			continue
		}
		for name, body := range map[string]string{
			"alone":        call(m),
			"in a batch":   "[" + call(rpc.MethodStats) + "," + call(m) + "]",
			"notification": `{"jsonrpc":"2.0","method":"` + m + `"}`,
		} {
			if code, _ := post(t, srv.URL+"/rpc", "Bearer "+worker, body); code != http.StatusForbidden {
				t.Errorf("worker token, %s %s: %d, want 403", m, name, code)
			}
		}
		if code, _ := post(t, srv.URL+"/rpc", "Bearer "+full, call(m)); code == http.StatusForbidden || code == http.StatusUnauthorized {
			t.Errorf("full token, %s: %d", m, code)
		}
	}
	for _, m := range []string{rpc.MethodInitialize, rpc.MethodPing, rpc.MethodShutdown, "no/such/method"} {
		if code, _ := post(t, srv.URL+"/rpc", "Bearer "+worker, call(m)); code != http.StatusForbidden {
			t.Errorf("worker token, %s: %d, want 403", m, code)
		}
	}
}
