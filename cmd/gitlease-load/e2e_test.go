package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbtest"
)

const e2eSecret = "load-test-secret"

// TestLoadAgainstServe builds gitlease, starts `gitlease serve` on a fresh
// database without a worker, runs the load with redeliveries and
// collisions, and checks the tool's database check passes and its counts
// add up, against the database too. Then the baseline on that database.
func TestLoadAgainstServe(t *testing.T) {
	dsn := dbtest.URL(t)
	srv := startServe(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// A wrong secret is told apart before any load is sent.
	var out strings.Builder
	if _, err := Run(ctx, Options{URL: srv.url, Secret: "wrong", Concurrency: 1, Count: 10}, &out); err == nil || !strings.Contains(err.Error(), "GITHUB_WEBHOOK_SECRET") {
		t.Errorf("Run with a wrong secret: %v, want the probe to refuse it", err)
	}

	rep, err := Run(ctx, Options{
		URL: srv.url, Secret: e2eSecret, Concurrency: 8, Count: 300,
		Replay: 0.1, Collide: 0.1, DSN: dsn, Seed: 1, PID: srv.pid,
	}, &out)
	t.Logf("report:\n%s", out.String())
	if err != nil {
		t.Fatalf("Run: %v\nserve's log:\n%s", err, srv.log())
	}
	if rep.Failed() || len(rep.Checks) != 7 {
		t.Fatalf("checks failed or missing (%d)", len(rep.Checks))
	}

	h, sent := rep.HTTP, rep.Sent
	if h.Requests != 300 || sent["fresh"]+sent["replay"]+sent["collide"] != 300 {
		t.Errorf("requests %d, sent %v; want 300 in all", h.Requests, sent)
	}
	if sent["replay"] == 0 || sent["collide"] == 0 {
		t.Errorf("sent %v: want replays and collisions at 0.1 each", sent)
	}
	total := 0
	for _, n := range h.ByOutcome {
		total += n
	}
	if total != 300 {
		t.Errorf("outcomes %v add up to %d, want 300", h.ByOutcome, total)
	}
	if h.ByOutcome["enqueued"] != sent["fresh"] || h.ByOutcome["replay"] != sent["replay"] ||
		h.ByOutcome["subject_collision"] != sent["collide"] {
		t.Errorf("outcomes %v do not match what was sent %v", h.ByOutcome, sent)
	}
	if h.ByStatus["202"] != sent["fresh"] || h.ByStatus["200"] != sent["replay"]+sent["collide"] {
		t.Errorf("statuses %v do not match what was sent %v", h.ByStatus, sent)
	}
	if h.Percentile(100) <= 0 || h.Percentile(50) > h.Percentile(99) || h.Throughput() <= 0 {
		t.Errorf("latencies p50 %s p99 %s max %s, throughput %g", h.Percentile(50), h.Percentile(99), h.Percentile(100), h.Throughput())
	}
	if rep.Proc == nil || rep.Proc.MaxRSS <= 0 || rep.Proc.PID != srv.pid {
		t.Errorf("serve's memory not sampled: %+v", rep.Proc)
	}

	// The database, counted independently: the probe's ping, one row per
	// fresh delivery and collision, and an item per fresh delivery only.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var deliveries, items, attempts int
	if err := conn.QueryRow(ctx, `SELECT count(*), coalesce(sum(attempts), 0) FROM deliveries`).Scan(&deliveries, &attempts); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM work_items`).Scan(&items); err != nil {
		t.Fatal(err)
	}
	if want := 1 + sent["fresh"] + sent["collide"]; deliveries != want {
		t.Errorf("%d deliveries rows, want %d", deliveries, want)
	}
	if want := 1 + 300; attempts != want {
		t.Errorf("%d attempts in all, want %d", attempts, want)
	}
	if items != sent["fresh"] {
		t.Errorf("%d work items, want %d", items, sent["fresh"])
	}

	// The baseline on the same database.
	out.Reset()
	rep, err = Run(ctx, Options{Baseline: true, DSN: dsn, Concurrency: 4, Count: 50, Seed: 1}, &out)
	t.Logf("baseline:\n%s", out.String())
	if err != nil {
		t.Fatalf("baseline: %v", err)
	}
	if rep.Baseline == nil || rep.Baseline.Requests != 50 || rep.Baseline.ByStatus["committed"] != 50 || rep.HTTP != nil {
		t.Errorf("baseline report %+v", rep.Baseline)
	}
	var rows, minSize int
	if err := conn.QueryRow(ctx, `SELECT count(*), min(length(body)) FROM load_baseline`).Scan(&rows, &minSize); err != nil {
		t.Fatal(err)
	}
	if rows != 50 || minSize < 19<<10 {
		t.Errorf("load_baseline has %d rows, smallest %d bytes; want 50 of about 20 KiB", rows, minSize)
	}
}

// serveProc is a running `gitlease serve`.
type serveProc struct {
	url string
	pid int

	mu    sync.Mutex
	lines []string
}

// log returns serve's last log lines.
func (s *serveProc) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// startServe builds gitlease and starts `serve` on dsn with no worker and
// no GitHub credentials, on a free port; it is stopped when t ends.
func startServe(t *testing.T, dsn string) *serveProc {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gitlease")
	build := exec.Command("go", "build", "-o", bin, "../gitlease")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ../gitlease: %v\n%s", err, out)
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "DATABASE_URL" || name == "PORT" || strings.HasPrefix(name, "GITHUB_") || strings.HasPrefix(name, "GITLEASE_") {
			continue
		}
		env = append(env, kv)
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(env, "DATABASE_URL="+dsn, "PORT=0", "GITHUB_WEBHOOK_SECRET="+e2eSecret, "GITLEASE_WORKER_SLOTS=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start serve: %v", err)
	}
	srv := &serveProc{pid: cmd.Process.Pid}
	addrs := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			srv.mu.Lock()
			if srv.lines = append(srv.lines, line); len(srv.lines) > 50 {
				srv.lines = srv.lines[1:]
			}
			srv.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving" {
				select {
				case addrs <- rec.Addr:
				default:
				}
			}
		}
	}()
	exited := make(chan error, 1)
	go func() {
		<-scanned // Wait closes the pipe; read it to the end first
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case addr := <-addrs:
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("serve listens on %q: %v", addr, err)
		}
		srv.url = "http://127.0.0.1:" + port + "/webhook"
	case err := <-exited:
		t.Fatalf("serve exited at start: %v\n%s", err, srv.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not listen within 60s\n%s", srv.log())
	}
	ready := strings.TrimSuffix(srv.url, "/webhook") + "/readyz"
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return srv
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within 30s: %v\n%s", ready, err, srv.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
