package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/pgcluster"
)

// TestDev runs the real binary's `dev` command in a fresh directory, the
// way `make dev` does: it must bring up its own PostgreSQL, serve /readyz
// and /rpc with the token it remembers in .gitlease/dev.json, exit 0 on
// Ctrl-C (SIGINT), and leave no PostgreSQL it started behind.
func TestDev(t *testing.T) {
	if _, err := pgcluster.FindBinDir(context.Background(), os.Getenv("GITLEASE_PG_BINDIR")); err != nil {
		t.Fatalf("gitlease dev needs the PostgreSQL server binaries on this machine: %v", err)
	}
	bin := buildGitlease(t)
	work := devWorkDir(t)
	pgdata := filepath.Join(work, ".gitlease", "pgdata")

	cmd := exec.Command(bin, "dev", "--port", "0")
	cmd.Dir = work
	cmd.Env = devTestEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start gitlease dev: %v", err)
	}
	// done is closed once the process has exited; waitErr is its status.
	done := make(chan struct{})
	var waitErr error
	baseURL := make(chan string, 1)
	bannerDone := make(chan struct{}) // the banner's last line was read
	var out lockedBuffer
	go func() {
		urlRE := regexp.MustCompile(`base URL\s+(http://127\.0\.0\.1:\d+)`)
		sc := bufio.NewScanner(stdout)
		ended := false
		for sc.Scan() {
			out.Write(append(sc.Bytes(), '\n'))
			if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
				baseURL <- m[1]
			}
			if !ended && strings.Contains(sc.Text(), "Ctrl-C stops it.") {
				ended = true
				close(bannerDone)
			}
		}
		io.Copy(io.Discard, stdout)
		waitErr = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		// Only reached with the process still running when the test failed
		// early: do not leave it, or its PostgreSQL, behind.
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
		if pid := pgcluster.PostmasterPID(pgdata); pid > 0 && syscall.Kill(pid, 0) == nil {
			syscall.Kill(pid, syscall.SIGQUIT)
		}
		if t.Failed() {
			t.Logf("gitlease dev stdout:\n%s\nstderr:\n%s", out.String(), stderr.String())
		}
	})

	var base string
	select {
	case base = <-baseURL:
	case <-done:
		t.Fatalf("gitlease dev exited before it was ready: %v", waitErr)
	case <-time.After(60 * time.Second):
		t.Fatal("gitlease dev printed no base URL within 60s")
	}
	waitReady(t, base+"/readyz", 60*time.Second)
	select { // the checks below read the whole banner, not the part read so far
	case <-bannerDone:
	case <-time.After(30 * time.Second):
		t.Fatal("gitlease dev printed no end of its banner within 30s")
	}

	for _, want := range []string{base + "/webhook", `Authorization: Bearer`, " deliver --event issues --url ", "in-process fake GitHub"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dev output lacks %q", want)
		}
	}
	// Listening on 127.0.0.1 only, as the banner says.
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	if addrs := listeningOn(t, port); len(addrs) != 1 || addrs[0] != "127.0.0.1" {
		t.Errorf("dev listens on %v, want 127.0.0.1 only", addrs)
	}

	fi, err := os.Stat(filepath.Join(work, ".gitlease", "dev.json"))
	if err != nil {
		t.Fatalf("dev.json: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("dev.json mode = %v, want 0600", fi.Mode().Perm())
	}
	b, err := os.ReadFile(filepath.Join(work, ".gitlease", "dev.json"))
	if err != nil {
		t.Fatal(err)
	}
	var state devState
	if err := json.Unmarshal(b, &state); err != nil {
		t.Fatalf("dev.json: %v", err)
	}
	if len(state.RPCToken) != 64 || len(state.WebhookSecret) != 64 || state.PostgresPort == 0 {
		t.Fatalf("dev.json = %s, want a 64-hex-digit webhook_secret and rpc_token and a postgres_port", b)
	}
	if !strings.Contains(out.String(), state.RPCToken) || !strings.Contains(out.String(), state.WebhookSecret) {
		t.Errorf("dev output does not show the token and secret kept in dev.json")
	}
	// The banner's deliver command works as pasted: the secret rides in
	// the environment, not on the command line as a flag.
	if !strings.Contains(out.String(), "GITHUB_WEBHOOK_SECRET="+state.WebhookSecret+" ") {
		t.Errorf("the banner's deliver command does not set GITHUB_WEBHOOK_SECRET")
	}
	// The cluster trusts no one: without dev.json's password a local user
	// cannot log in as postgres.
	for _, pw := range []string{"", "wrong"} {
		u := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", pw, state.PostgresPort)
		if conn, err := pgx.Connect(context.Background(), u); err == nil {
			conn.Close(context.Background())
			t.Errorf("dev's PostgreSQL let postgres in with password %q", pw)
		}
	}

	req, err := http.NewRequest(http.MethodPost, base+"/rpc",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"queue/stats"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+state.RPCToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /rpc: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /rpc: status %d: %s", resp.StatusCode, body)
	}
	var rpcResp struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &rpcResp); err != nil {
		t.Fatalf("POST /rpc: %v: %s", err, body)
	}
	if rpcResp.JSONRPC != "2.0" || string(rpcResp.ID) != "1" || len(rpcResp.Error) != 0 ||
		len(rpcResp.Result) == 0 || rpcResp.Result[0] != '{' {
		t.Fatalf("queue/stats answered %s, want a JSON-RPC 2.0 result object for id 1", body)
	}

	// The whole flow without GitHub credentials: a signed delivery of the
	// sample payload becomes an item, the built-in worker leases it, and the
	// fake GitHub logs the branch, pull request and check run that
	// would be created.
	entryID := deliverSample(t, bin, base, state.WebhookSecret)
	const repo = "/repos/octocat/Hello-World"
	wants := map[string]map[string]any{
		"branch":       {"method": "POST", "path": repo + "/git/refs", "ref": "refs/heads/gitlease/issue-1347", "http_status": 201.0},
		"pull request": {"method": "POST", "path": repo + "/pulls", "head": "gitlease/issue-1347", "base": "main", "draft": true, "http_status": 201.0},
		"check run":    {"method": "POST", "path": repo + "/check-runs", "name": "gitlease", "http_status": 201.0},
	}
	leased, missing := false, []string{}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if !leased {
			var view struct {
				Status       string          `json:"status"`
				Provisioning json.RawMessage `json:"provisioning"`
			}
			rpcCall(t, base, state.RPCToken, "gitlease/entry/get", map[string]any{"entry_id": entryID}, &view)
			leased = view.Status == "assigned" || view.Status == "completed" || len(view.Provisioning) > 0
		}
		missing = missing[:0]
		calls := dryRunCalls(stderr.String())
		for what, want := range wants {
			if !hasRecord(calls, want) {
				missing = append(missing, what)
			}
		}
		if leased && len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 30s of the delivery: item %s leased: %v; no dry-run GitHub call logged for: %v", entryID, leased, missing)
		}
	}
	// The same delivery again, as the banner's command sends it.
	pasteDevDeliver(t, bin, out.String())

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatalf("send SIGINT: %v", err)
	}
	select {
	case <-done:
		if waitErr != nil {
			t.Fatalf("gitlease dev after SIGINT: %v, want exit status 0", waitErr)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("gitlease dev did not exit within 60s of SIGINT")
	}
	if procs := processesMentioning(pgdata); len(procs) > 0 {
		t.Fatalf("PostgreSQL processes left running on %s:\n%s", pgdata, strings.Join(procs, "\n"))
	}
}

// deliverSample sends testdata/payloads/issues-opened.json to the server
// at base with `gitlease deliver`, signed with secret, and returns the
// entry ID of the item it became.
func deliverSample(t *testing.T, bin, base, secret string) string {
	t.Helper()
	payload, err := filepath.Abs(filepath.Join("..", "..", "testdata", "payloads", "issues-opened.json"))
	if err != nil {
		t.Fatal(err)
	}
	deliver := exec.Command(bin, "deliver", "--event", "issues", "--url", base+"/webhook", payload)
	deliver.Env = append(devTestEnv(), "GITHUB_WEBHOOK_SECRET="+secret)
	var errOut bytes.Buffer
	deliver.Stderr = &errOut
	out, err := deliver.Output()
	if err != nil {
		t.Fatalf("gitlease deliver: %v\n%s%s", err, out, errOut.String())
	}
	// "HTTP 202 Accepted", then the JSON answer.
	_, answer, _ := strings.Cut(string(out), "\n")
	var res struct {
		Outcome string `json:"outcome"`
		EntryID string `json:"entry_id"`
	}
	if err := json.Unmarshal([]byte(answer), &res); err != nil || res.Outcome != "enqueued" || res.EntryID == "" {
		t.Fatalf("gitlease deliver printed %q, want an enqueued outcome with an entry_id", out)
	}
	return res.EntryID
}

// rpcCall calls method on the server's /rpc and decodes its result into v.
func rpcCall(t *testing.T, base, token, method string, params, v any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, err := http.NewRequest(http.MethodPost, base+"/rpc", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	var answer struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || len(answer.Error) > 0 || len(answer.Result) == 0 {
		t.Fatalf("%s: status %d, error %s (%v)", method, resp.StatusCode, answer.Error, err)
	}
	if err := json.Unmarshal(answer.Result, v); err != nil {
		t.Fatalf("%s: result %s: %v", method, answer.Result, err)
	}
}

// dryRunCalls are the "dry-run GitHub call" records among dev's JSON log
// lines; other lines (and any that are not JSON) are skipped.
func dryRunCalls(logs string) []map[string]any {
	var calls []map[string]any
	for _, line := range strings.Split(logs, "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && r["msg"] == "dry-run GitHub call" {
			calls = append(calls, r)
		}
	}
	return calls
}

// hasRecord reports whether some record carries every field of want, with
// JSON's types (numbers are float64).
func hasRecord(records []map[string]any, want map[string]any) bool {
next:
	for _, r := range records {
		for k, v := range want {
			if r[k] != v {
				continue next
			}
		}
		return true
	}
	return false
}

// pasteDevDeliver runs the deliver line of dev's banner with sh, as a
// developer pasting it would, from the repository root (where its payload
// path points), with bin standing for the command's name, and checks the
// delivery was answered 2xx.
func pasteDevDeliver(t *testing.T, bin, banner string) {
	t.Helper()
	var line string
	for _, l := range strings.Split(banner, "\n") {
		if strings.Contains(l, " deliver --event ") {
			line = strings.TrimSpace(l)
		}
	}
	head, rest, ok := strings.Cut(line, " deliver ")
	assign, _, _ := strings.Cut(head, " ")
	if !ok || !strings.HasPrefix(assign, "GITHUB_WEBHOOK_SECRET=") {
		t.Fatalf("no GITHUB_WEBHOOK_SECRET=… deliver command in the banner:\n%s", banner)
	}
	sh := exec.Command("sh", "-c", assign+" "+bin+" deliver "+rest)
	sh.Dir = "../.."
	sh.Env = devTestEnv()
	out, err := sh.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "HTTP 20") {
		t.Errorf("the banner's deliver command, pasted: %v\n%s", err, out)
	}
}

// listeningOn lists the local addresses with a TCP socket listening on
// port, from /proc/net/tcp and tcp6 ("127.0.0.1", "0.0.0.0", "::", ...).
func listeningOn(t *testing.T, port string) []string {
	t.Helper()
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(l)
			if len(f) < 4 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			hexIP, hexPort, _ := strings.Cut(f[1], ":")
			if lp, _ := strconv.ParseUint(hexPort, 16, 16); lp != p {
				continue
			}
			raw, _ := hex.DecodeString(hexIP)
			// The kernel prints each 32-bit word in host (little-endian) order.
			for i := 0; i+4 <= len(raw); i += 4 {
				raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
			}
			addrs = append(addrs, net.IP(raw).String())
		}
	}
	return addrs
}

// buildGitlease builds this package's binary once into a temp directory.
func buildGitlease(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gitlease")
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	build := exec.Command(goTool, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// devWorkDir is a fresh working directory for dev. As root, PostgreSQL
// runs as the postgres OS user, who must be able to reach the data
// directory: t.TempDir is 0700 and $TMPDIR may be private, so use a
// world-searchable directory under /tmp.
func devWorkDir(t *testing.T) string {
	t.Helper()
	parent := ""
	if os.Geteuid() == 0 {
		parent = "/tmp"
	}
	return openDir(t, parent, "gitlease-devtest-")
}

// openDir makes a world-searchable directory under parent (the default
// temporary directory when empty), removed when the test ends.
func openDir(t *testing.T, parent, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// devTestEnv is the environment without settings that would change what
// dev generates, where it listens, how a delivery flows through it, or where
// its traces go.
func devTestEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "OTEL_") { // traces go where a test says, if anywhere
			continue
		}
		switch name {
		case "DATABASE_URL", "PORT", "GITHUB_WEBHOOK_SECRET", "GITLEASE_RPC_TOKEN", "GITLEASE_RPC_WORKER_TOKEN",
			"GITHUB_APP_ID", "GITHUB_PRIVATE_KEY", "GITHUB_PRIVATE_KEY_FILE", "GITLEASE_WORKER_EXEC",
			"GITLEASE_WORKER_SLOTS", "GITLEASE_BRANCH_PREFIX", "GITLEASE_TRIGGER_LABEL":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// waitReady polls url until it answers 200, failing the test after limit.
func waitReady(t *testing.T, url string, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status + ": " + string(body)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("GET %s not 200 within %v; last answer: %s", url, limit, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// processesMentioning lists "pid: cmdline" of live processes whose command
// line contains s. A postmaster's command line holds its -D data directory.
func processesMentioning(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	self := os.Getpid()
	for _, e := range entries {
		pid := e.Name()
		if pid == "" || strings.Trim(pid, "0123456789") != "" || pid == strconv.Itoa(self) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if err != nil {
			continue
		}
		cmdline := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		if strings.Contains(cmdline, s) {
			found = append(found, pid+": "+cmdline)
		}
	}
	return found
}

// lockedBuffer is a bytes.Buffer safe for the writer goroutine and the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
