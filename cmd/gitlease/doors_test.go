package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitlease/gitlease/webhook"
)

// TestDoors drives the built binary from outside, as an attacker would,
// at each door SPEC §3, §5 and §7.1 close: the worker token, secrets in
// argv and their length, slow senders, the dashboard's forms, sign-ins and
// sign-out.
func TestDoors(t *testing.T) {
	bin := buildGitlease(t)
	t.Run("worker token", func(t *testing.T) { t.Parallel(); testWorkerToken(t, bin) })
	t.Run("no secret flags", func(t *testing.T) { t.Parallel(); testNoSecretFlags(t, bin) })
	t.Run("secret length", func(t *testing.T) { t.Parallel(); testSecretLength(t, bin) })
	t.Run("slow senders", func(t *testing.T) { t.Parallel(); testSlowSenders(t, bin) })
	t.Run("dashboard", func(t *testing.T) { t.Parallel(); testDashboardDoors(t, bin) })
}

const (
	doorsWebhookSecret = "doors-webhook-secret-0123"
	doorsRPCToken      = "doors-rpc-token-0123456789"
	doorsWorkerToken   = "doors-worker-token-0123456"
	doorsUIToken       = "doors-ui-token-0123456789"
)

// rpcPost posts body to /rpc with token and returns the status and answer.
func rpcPost(t *testing.T, base, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/rpc", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// testWorkerToken: with GITLEASE_RPC_WORKER_TOKEN, queue/drop, and a batch
// holding it beside allowed calls, are answered 403 and nothing in them
// runs (the item stays pending, the batch's enqueue enqueued nothing); the
// lease side works; the full token still may do anything. With only the
// worker token set, /rpc is enabled for it.
func testWorkerToken(t *testing.T, bin string) {
	srv := startServe(t, bin, baseServeEnv(t, "GITHUB_WEBHOOK_SECRET="+doorsWebhookSecret, "GITLEASE_WORKER_SLOTS=0",
		"GITLEASE_RPC_TOKEN="+doorsRPCToken, "GITLEASE_RPC_WORKER_TOKEN="+doorsWorkerToken), -1)
	enqueue := func(n int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"queue/v2/enqueue","params":{"subject_dispatch":{"subject":{"kind":"github_issue","id":"1296269#%d","title":"t"},"workflow_ref":"coding","trigger_source":"test","requested_at":"2026-10-01T11:59:58Z"}}}`, n, n)
	}
	var res struct {
		EntryID string `json:"entry_id"`
	}
	code, body := rpcPost(t, srv.url, doorsRPCToken, enqueue(1))
	var answer struct {
		Result json.RawMessage `json:"result"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &answer) != nil || json.Unmarshal(answer.Result, &res) != nil || res.EntryID == "" {
		t.Fatalf("enqueue with the full token: %d %s", code, body)
	}
	drop := fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":"queue/drop","params":{"entry_id":%q}}`, res.EntryID)
	stats := `{"jsonrpc":"2.0","id":8,"method":"queue/stats"}`
	refused := []struct{ name, body string }{
		{"queue/drop", drop},
		{"a batch holding queue/drop", "[" + stats + "," + enqueue(2) + "," + drop + "]"},
		{"queue/v2/enqueue", enqueue(3)},
		{"queue/reorder", `{"jsonrpc":"2.0","id":1,"method":"queue/reorder","params":{}}`},
		{"queue/hold", `{"jsonrpc":"2.0","id":1,"method":"queue/hold","params":{}}`},
	}
	for _, r := range refused {
		if code, body := rpcPost(t, srv.url, doorsWorkerToken, r.body); code != http.StatusForbidden {
			t.Errorf("%s with the worker token: %d %s, want 403", r.name, code, body)
		}
	}
	var st struct {
		Pending uint64 `json:"pending"`
		Total   uint64 `json:"total"`
	}
	rpcCall(t, srv.url, doorsWorkerToken, "queue/stats", nil, &st)
	var list struct {
		Entries []struct {
			EntryID string `json:"entry_id"`
			Status  string `json:"status"`
		} `json:"entries"`
	}
	rpcCall(t, srv.url, doorsRPCToken, "queue/list", map[string]any{}, &list)
	if len(list.Entries) != 1 || list.Entries[0].EntryID != res.EntryID || list.Entries[0].Status != "pending" {
		t.Errorf("after the refused calls the queue holds %+v, want just %s, pending", list.Entries, res.EntryID)
	}
	// The lease side runs with the worker token, batched too.
	lease := `{"jsonrpc":"2.0","id":2,"method":"queue/v2/lease","params":{"max":1,"owner_id":"doors-worker","workflow_ids":["coding"]}}`
	if code, body := rpcPost(t, srv.url, doorsWorkerToken, "["+stats+","+lease+"]"); code != http.StatusOK || !strings.Contains(body, res.EntryID) {
		t.Errorf("stats and lease with the worker token: %d %s, want 200 leasing %s", code, body, res.EntryID)
	}
	if code, _ := rpcPost(t, srv.url, "wrong-token-0123456789", stats); code != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d, want 401", code)
	}

	// Only the worker token: /rpc answers it, and only it.
	only := startServe(t, bin, baseServeEnv(t, "GITHUB_WEBHOOK_SECRET="+doorsWebhookSecret, "GITLEASE_WORKER_SLOTS=0",
		"GITLEASE_RPC_WORKER_TOKEN="+doorsWorkerToken), -1)
	if code, body := rpcPost(t, only.url, doorsWorkerToken, stats); code != http.StatusOK {
		t.Errorf("worker token alone, queue/stats: %d %s, want 200", code, body)
	}
	if code, _ := rpcPost(t, only.url, doorsWorkerToken, enqueue(4)); code != http.StatusForbidden {
		t.Errorf("worker token alone, enqueue: %d, want 403", code)
	}
}

// secretFlag matches a flag that would carry a secret: a token, a secret,
// a key or a connection string itself (a flag naming a file holding one,
// …-file, carries none).
var secretFlag = regexp.MustCompile(`(?m)^\s+-{1,2}([a-z0-9-]*(token|secret|database-url|private-key|password))\b(\s|$)`)

// testNoSecretFlags: no command's -h lists a flag that takes a secret,
// and those flags are refused.
func testNoSecretFlags(t *testing.T, bin string) {
	for _, command := range []string{"serve", "migrate", "dev", "plugin", "worker", "deliver", "redeliver", "manifest"} {
		cmd := exec.Command(bin, command, "-h")
		cmd.Env = devTestEnv()
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), "-") {
			t.Errorf("%s -h printed no flags: %s", command, out)
		}
		if m := secretFlag.FindAllStringSubmatch(string(out), -1); len(m) > 0 {
			t.Errorf("%s -h lists secret flags %q:\n%s", command, m, out)
		}
	}
	for _, args := range [][]string{
		{"serve", "--database-url", "postgres://u:pw@127.0.0.1/db"}, {"migrate", "--database-url", "postgres://u:pw@127.0.0.1/db"},
		{"plugin", "--database-url", "postgres://u:pw@127.0.0.1/db"}, {"dev", "--database-url", "postgres://u:pw@127.0.0.1/db"},
		{"worker", "--token", doorsWorkerToken, "--url", "http://127.0.0.1:1", "--exec", "true"},
		{"deliver", "--secret", doorsWebhookSecret, "--event", "ping", "../../testdata/payloads/ping.json"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Env = devTestEnv()
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "flag provided but not defined") {
			t.Errorf("gitlease %s: %v\n%s\nwant exit 2 for an undefined flag", strings.Join(args[:2], " "), err, out)
		}
	}
}

// testSecretLength: each token and webhook secret of 15 characters stops
// serve (and worker, and deliver) at start with one line naming its
// variable, a rotation list's second secret and _FILE values included;
// with every one at 16 characters serve starts.
func testSecretLength(t *testing.T, bin string) {
	const short, ok = "fifteen-chars-x", "sixteen-chars-xy"
	dir := t.TempDir()
	shortFile := filepath.Join(dir, "short")
	if err := os.WriteFile(shortFile, []byte(short+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(extra ...string) []string {
		return append(append(devTestEnv(), "DATABASE_URL=postgres://127.0.0.1:1/none", "PORT=0", "GITLEASE_WORKER_SLOTS=0"), extra...)
	}
	cases := []struct {
		name    string
		command []string
		env     []string
		names   string
	}{
		{"webhook secret", []string{"serve"}, env("GITHUB_WEBHOOK_SECRET=" + short), "GITHUB_WEBHOOK_SECRET"},
		{"second webhook secret", []string{"serve"}, env("GITHUB_WEBHOOK_SECRET=" + ok + "," + short), "GITHUB_WEBHOOK_SECRET"},
		{"webhook secret file", []string{"serve"}, env("GITHUB_WEBHOOK_SECRET_FILE=" + shortFile), "GITHUB_WEBHOOK_SECRET_FILE"},
		{"rpc token", []string{"serve"}, env("GITHUB_WEBHOOK_SECRET="+ok, "GITLEASE_RPC_TOKEN="+short), "GITLEASE_RPC_TOKEN"},
		{"rpc token file", []string{"serve"}, env("GITHUB_WEBHOOK_SECRET="+ok, "GITLEASE_RPC_TOKEN_FILE="+shortFile), "GITLEASE_RPC_TOKEN_FILE"},
		{"worker token", []string{"serve"}, env("GITHUB_WEBHOOK_SECRET="+ok, "GITLEASE_RPC_WORKER_TOKEN="+short), "GITLEASE_RPC_WORKER_TOKEN"},
		{"ui token", []string{"serve"}, env("GITHUB_WEBHOOK_SECRET="+ok, "GITLEASE_UI_TOKEN="+short), "GITLEASE_UI_TOKEN"},
		{"ui view token", []string{"serve"}, env("GITHUB_WEBHOOK_SECRET="+ok, "GITLEASE_UI_TOKEN="+ok, "GITLEASE_UI_VIEW_TOKEN="+short), "GITLEASE_UI_VIEW_TOKEN"},
		{"ui token file", []string{"serve"}, env("GITHUB_WEBHOOK_SECRET="+ok, "GITLEASE_UI_TOKEN_FILE="+shortFile), "GITLEASE_UI_TOKEN_FILE"},
		{"worker's token", []string{"worker", "--url", "http://127.0.0.1:1", "--exec", "true"}, env("GITLEASE_RPC_WORKER_TOKEN=" + short), "GITLEASE_RPC_WORKER_TOKEN"},
		{"worker's full token", []string{"worker", "--url", "http://127.0.0.1:1", "--exec", "true"}, env("GITLEASE_RPC_TOKEN=" + short), "GITLEASE_RPC_TOKEN"},
		{"deliver's secret", []string{"deliver", "--event", "ping", "--url", "http://127.0.0.1:1/webhook", "../../testdata/payloads/ping.json"},
			env("GITHUB_WEBHOOK_SECRET=" + short), "GITHUB_WEBHOOK_SECRET"},
	}
	for _, tc := range cases {
		cmd := exec.Command(bin, tc.command...)
		cmd.Env = tc.env
		out, err := cmd.CombinedOutput()
		want := "gitlease: " + tc.names + ": "
		if ee, isExit := err.(*exec.ExitError); !isExit || ee.ExitCode() != 2 || !strings.Contains(string(out), want) || !strings.Contains(string(out), "16 characters") {
			t.Errorf("%s of 15 characters: %v\n%s\nwant exit 2 and a line %q… naming 16 characters", tc.name, err, out, want)
		}
		if strings.Contains(string(out), short) {
			t.Errorf("%s: the refusal shows the secret: %s", tc.name, out)
		}
	}
	srv := startServe(t, bin, baseServeEnv(t, "GITLEASE_WORKER_SLOTS=0", "GITHUB_WEBHOOK_SECRET="+ok+",sixteen-chars-yz",
		"GITLEASE_RPC_TOKEN="+ok, "GITLEASE_RPC_WORKER_TOKEN=sixteen-chars-wk", "GITLEASE_UI_TOKEN=sixteen-chars-ui",
		"GITLEASE_UI_VIEW_TOKEN=sixteen-chars-vw"), -1)
	waitReady(t, srv.url+"/readyz", 30*time.Second)
}

// signedDelivery is a POST /webhook of the ping fixture under the test's
// secret.
func signedDelivery(t *testing.T, base, id string) *http.Request {
	t.Helper()
	body, err := os.ReadFile("../../testdata/payloads/ping.json")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhook.EventHeader, "ping")
	req.Header.Set(webhook.DeliveryHeader, id)
	req.Header.Set(webhook.SignatureHeader, webhook.Sign([]byte(doorsWebhookSecret), body))
	return req
}

// slowSender opens a delivery claiming a 25 MiB body and then sends
// chunk every step until the server closes the connection or limit
// passes. It returns how long the server let it stay, and whether it was
// cut off; opened is closed once its headers are sent.
func slowSender(t *testing.T, base string, chunk []byte, step, limit time.Duration, opened chan<- struct{}) (time.Duration, bool) {
	u, _ := url.Parse(base)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Error(err)
		close(opened)
		return 0, false
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /webhook HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-GitHub-Event: ping\r\n"+
		"X-GitHub-Delivery: slow-%d\r\nX-Hub-Signature-256: sha256=%s\r\nContent-Length: %d\r\n\r\n{",
		u.Host, time.Now().UnixNano(), strings.Repeat("0", 64), webhook.MaxBody)
	close(opened)
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, conn) // returns when the server closes
		close(closed)
	}()
	for time.Since(start) < limit {
		select {
		case <-closed:
			return time.Since(start), true
		case <-time.After(step):
		}
		_, _ = conn.Write(chunk)
	}
	return time.Since(start), false
}

// testSlowSenders: three clients claiming 25 MiB bodies (75 MiB, past the
// 64 MiB budget) and trickling a byte a second do not make 20 real
// deliveries sent meanwhile fail: all 20 get 2xx. Each slow sender, at 1
// byte/s or 16 KiB/s, is cut off within a few seconds. A 200-character
// X-GitHub-Delivery is echoed and logged cut to 128.
func testSlowSenders(t *testing.T, bin string) {
	srv := startServe(t, bin, baseServeEnv(t, "GITHUB_WEBHOOK_SECRET="+doorsWebhookSecret, "GITLEASE_WORKER_SLOTS=0"), -1)
	var wg sync.WaitGroup
	took := make([]time.Duration, 4)
	cut := make([]bool, 4)
	for i := range 4 {
		opened := make(chan struct{})
		chunk, step := []byte{' '}, time.Second
		if i == 3 {
			chunk, step = bytes.Repeat([]byte{' '}, 1600), 100*time.Millisecond // 16 KiB/s
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			took[i], cut[i] = slowSender(t, srv.url, chunk, step, 30*time.Second, opened)
		}()
		<-opened
	}
	var mu sync.Mutex
	statuses := map[int]int{}
	var dwg sync.WaitGroup
	for i := range 20 {
		dwg.Add(1)
		go func() {
			defer dwg.Done()
			resp, err := http.DefaultClient.Do(signedDelivery(t, srv.url, fmt.Sprintf("real-%d", i)))
			status := 0
			if err == nil {
				status = resp.StatusCode
				resp.Body.Close()
			}
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		}()
	}
	dwg.Wait()
	wg.Wait()
	for status, n := range statuses {
		if status < 200 || status > 299 {
			t.Errorf("%d of 20 real deliveries beside the slow senders got %d, want 2xx (%v)", n, status, statuses)
		}
	}
	for i := range 4 {
		if !cut[i] || took[i] > 5*time.Second {
			t.Errorf("slow sender %d was held %v (cut off: %v), want cut off within 5s", i, took[i], cut[i])
		} else {
			t.Logf("slow sender %d cut off after %v", i, took[i].Round(100*time.Millisecond))
		}
	}

	long := strings.Repeat("d", 200)
	resp, err := http.DefaultClient.Do(signedDelivery(t, srv.url, long))
	if err != nil {
		t.Fatal(err)
	}
	var answer webhook.Response
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || answer.DeliveryID != long[:128] {
		t.Errorf("a 200-character delivery ID: %d, echoed %d characters; want 400 and 128", resp.StatusCode, len(answer.DeliveryID))
	}
	time.Sleep(200 * time.Millisecond) // the log line follows the answer
	if strings.Contains(srv.out.String(), long[:129]) || !strings.Contains(srv.out.String(), `"delivery_id":"`+long[:128]+`"`) {
		t.Error("serve's log does not show the 200-character delivery ID cut to 128")
	}
}

// testDashboardDoors: a 10 MiB login form (three at once, declared or
// chunked, URL-encoded or multipart) is refused without serve's memory
// growing; the sixth bad sign-in from one client is answered 429; an old
// cookie no longer works after its session signed out.
func testDashboardDoors(t *testing.T, bin string) {
	srv := startServe(t, bin, baseServeEnv(t, "GITHUB_WEBHOOK_SECRET="+doorsWebhookSecret, "GITLEASE_WORKER_SLOTS=0",
		"GITLEASE_UI_TOKEN="+doorsUIToken), -1)
	waitReady(t, srv.url+"/readyz", 30*time.Second)
	before := peakRSS(t, srv.pid)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			contentType := "application/x-www-form-urlencoded"
			if i%2 == 1 {
				contentType = "multipart/form-data; boundary=x"
			}
			var body io.Reader = io.MultiReader(strings.NewReader("token="), io.LimitReader(zeros{}, 10<<20))
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.url+"/ui/login", body)
			if i < 3 {
				req.ContentLength = 10<<20 + 6
			}
			req.Header.Set("Content-Type", contentType)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return // cut off mid-send: refused
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge && resp.StatusCode != http.StatusUnsupportedMediaType {
				t.Errorf("a 10 MiB login form (%s): %d, want 413 or 415", contentType, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	if grew := peakRSS(t, srv.pid) - before; grew > 8<<20 {
		t.Errorf("serve's peak memory grew %d MiB over six 10 MiB login forms, want under 8", grew>>20)
	} else {
		t.Logf("serve's peak memory grew %d KiB over six 10 MiB login forms", grew>>10)
	}

	login := func(jar http.CookieJar, token string) int {
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.PostForm(srv.url+"/ui/login", url.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// Sign in before the failures, which block this client's sign-ins.
	jar, _ := cookiejar.New(nil)
	if code := login(jar, doorsUIToken); code != http.StatusSeeOther {
		t.Fatalf("sign-in = %d, want 303", code)
	}
	for i := 1; i <= 6; i++ {
		want := http.StatusUnauthorized
		if i == 6 {
			want = http.StatusTooManyRequests
		}
		if code := login(nil, "wrong-token-0123456789"); code != want {
			t.Errorf("bad sign-in %d = %d, want %d", i, code, want)
		}
	}
	if code := login(nil, doorsUIToken); code != http.StatusTooManyRequests {
		t.Errorf("the right token from the blocked client = %d, want 429", code)
	}

	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(c *http.Client) (int, string) {
		resp, err := c.Get(srv.url + "/ui/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, page := get(c)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if code != http.StatusOK || m == nil {
		t.Fatalf("GET /ui/ signed in = %d, no CSRF token", code)
	}
	u, _ := url.Parse(srv.url + "/ui/")
	old := jar.Cookies(u)
	resp, err := c.PostForm(srv.url+"/ui/logout", url.Values{"csrf": {m[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out = %d, want 303", resp.StatusCode)
	}
	replay, _ := cookiejar.New(nil)
	replay.SetCookies(u, old)
	if code, _ := get(&http.Client{Jar: replay, CheckRedirect: c.CheckRedirect}); code != http.StatusSeeOther {
		t.Errorf("the old cookie after sign-out: GET /ui/ = %d, want 303 to the sign-in page", code)
	}
}
