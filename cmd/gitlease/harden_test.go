package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/webhook"
)

// These tests run the built binary's serve in a process of its own, as
// deployed: what they check (who can read the process, how much memory it
// holds) is a property of the process, not of a handler.

// serveProcess is a running `gitlease serve`.
type serveProcess struct {
	url string
	pid int
	out *lockedBuffer
}

// startServe starts bin's serve with env, as uid/gid when uid is not
// negative, and waits until it listens. The binary is copied where any
// user can run it.
func startServe(t *testing.T, bin string, env []string, uid int) serveProcess {
	t.Helper()
	return serveIn(t, bin, devWorkDir(t), env, uid) // world-searchable
}

// baseServeEnv is the environment of a test serve on a fresh database.
func baseServeEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	return append(append(devTestEnv(), "DATABASE_URL="+dbtest.URL(t), "PORT=0"), extra...)
}

// TestServeIsNonDumpable: a worker command running as the same non-root
// user as serve cannot read serve's environment (its secrets) through
// /proc/<serve>/environ, and its own environment holds none of them.
func TestServeIsNonDumpable(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test runs serve as the user nobody: run it as root (make test in the dev container does)")
	}
	const secret = "whsec-marker-4711"
	dir := devWorkDir(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	probe := fmt.Sprintf(`if cat /proc/$PPID/environ > %[1]s/environ 2>/dev/null; then echo read; else echo closed; fi > %[1]s/result.tmp
env > %[1]s/env
id -u > %[1]s/uid
mv %[1]s/result.tmp %[1]s/result`, dir)
	nobody := 65534
	srv := startServe(t, buildGitlease(t), baseServeEnv(t, "GITHUB_WEBHOOK_SECRET="+secret, "GITLEASE_RPC_TOKEN=rpc-"+secret,
		"GITLEASE_WORKER_SLOTS=1", "GITLEASE_WORKER_EXEC="+probe,
		// Unsandboxed: the flag itself is what holds here, and the probe
		// reports through files the sandbox would hide.
		"GITLEASE_WORKER_SANDBOX=none"), nobody)
	var res struct {
		EntryID string `json:"entry_id"`
	}
	rpcCall(t, srv.url, "rpc-"+secret, "queue/v2/enqueue", map[string]any{"subject_dispatch": map[string]any{
		"subject":      map[string]any{"kind": "github_issue", "id": "1296269#1", "title": "probe"},
		"workflow_ref": "coding", "trigger_source": "test", "requested_at": "2026-10-01T11:59:58Z",
	}}, &res)
	deadline := time.Now().Add(60 * time.Second)
	for !fileExists(dir+"/result") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	result, err := os.ReadFile(dir + "/result")
	if err != nil {
		t.Fatalf("the worker command did not report: %v", err)
	}
	if uid, _ := os.ReadFile(dir + "/uid"); strings.TrimSpace(string(uid)) != strconv.Itoa(nobody) {
		t.Fatalf("the command ran as uid %q, want serve's (%d)", uid, nobody)
	}
	if got := strings.TrimSpace(string(result)); got != "closed" {
		leaked, _ := os.ReadFile(dir + "/environ")
		t.Errorf("the command could read /proc/<serve>/environ (%s); it holds the secret: %v", got, strings.Contains(string(leaked), secret))
	}
	if env, _ := os.ReadFile(dir + "/env"); strings.Contains(string(env), secret) || strings.Contains(string(env), "DATABASE_URL") {
		t.Errorf("the command's own environment holds the server's secrets:\n%s", env)
	}
	// Non-dumpable, serve can still read its own /proc entries: the process
	// metrics (open file descriptors, memory) keep working.
	resp, err := http.Get(srv.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "\nprocess_open_fds ") {
		t.Errorf("GET /metrics = %d without process_open_fds", resp.StatusCode)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// peakRSS reads a process's peak resident memory (VmHWM) in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// zeros is an endless body of spaces that costs the sender no memory.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// TestServeHoldsBoundedBodies: 24 clients at once each send a 25 MiB body
// without the webhook secret, either without a signature header or with a
// well-formed wrong one (which must be read to be refused). serve's peak
// resident memory stays under 200 MiB: unsigned bodies are refused before
// they are read, and bodies being read are bounded by
// GITLEASE_MAX_INFLIGHT_BODY (64 MiB), the rest answered 503.
func TestServeHoldsBoundedBodies(t *testing.T) {
	t.Parallel()
	srv := startServe(t, buildGitlease(t), baseServeEnv(t, "GITHUB_WEBHOOK_SECRET=whsec-0123456789abcdef", "GITLEASE_WORKER_SLOTS=0"), -1)
	for _, signature := range []string{"", "sha256=" + strings.Repeat("0", 64)} {
		var wg sync.WaitGroup
		var mu sync.Mutex
		statuses := map[string]int{}
		for i := 0; i < 24; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.url+"/webhook", io.LimitReader(zeros{}, webhook.MaxBody))
				req.ContentLength = webhook.MaxBody
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(webhook.EventHeader, "issues")
				req.Header.Set(webhook.DeliveryHeader, fmt.Sprintf("flood-%d", i))
				if signature != "" {
					req.Header.Set(webhook.SignatureHeader, signature)
				}
				status := "connection closed early"
				if resp, err := http.DefaultClient.Do(req); err == nil {
					status = strconv.Itoa(resp.StatusCode)
					resp.Body.Close()
				}
				mu.Lock()
				statuses[status]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		t.Logf("signature %q: answers %v", signature, statuses)
		for status := range statuses {
			if status != "401" && status != "503" && status != "connection closed early" {
				t.Errorf("signature %q: answer %s, want 401 or 503", signature, status)
			}
		}
	}
	if peak := peakRSS(t, srv.pid); peak >= 200<<20 {
		t.Errorf("serve's peak resident memory %d MiB, want under 200 MiB", peak>>20)
	} else {
		t.Logf("serve's peak resident memory %d MiB", peak>>20)
	}
	waitReady(t, srv.url+"/healthz", 10*time.Second)
}
