package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/app"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/queue/rpc"
)

func enqueueTestIssue(t *testing.T, store *queue.Store, n int) string {
	t.Helper()
	res, err := store.Enqueue(context.Background(), queue.EnqueueParams{
		Dispatch: queue.SubjectDispatch{
			Subject:     &queue.SubjectRef{Kind: "github_issue", ID: fmt.Sprintf("1296269#%d", n), Title: "t"},
			WorkflowRef: "coding", TriggerSource: "test",
			RequestedAt: queue.Timestamp{Time: time.Now().UTC().Truncate(time.Second)},
		},
		Reservation: &queue.Reservation{Repository: "acme/widgets", BaseRef: "refs/heads/main",
			HeadRef: fmt.Sprintf("refs/heads/gitlease/issue-%d", n)},
	})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return res.EntryID
}

func waitItemStatus(t *testing.T, store *queue.Store, id, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		it, err := store.Get(context.Background(), id)
		if err == nil && it.Status() == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("item %s: status %s (%v), want %s within %v", id, it.Status(), err, want, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startBinary runs the gitlease binary; the returned func sends SIGTERM
// and returns its exit error.
func startBinary(t *testing.T, bin string, env []string, args ...string) (stop func() error, stderr *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	stderr = &lockedBuffer{}
	cmd.Stdout = stderr
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("gitlease %s output:\n%s", args[0], stderr.String())
		}
	})
	return func() error {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			done <- err // for the cleanup
			return err
		case <-time.After(60 * time.Second):
			return fmt.Errorf("gitlease %s did not exit within 60s of SIGTERM", args[0])
		}
	}, stderr
}

// TestWorkerCommand runs `gitlease worker` against a real /rpc endpoint: it
// leases, runs --exec with the item's environment in a sandbox of its own
// (a few processes, its own HOME and /tmp, the worker's GITHUB_TOKEN
// masked in the note and the log), completes over /rpc, and exits 0 on
// SIGTERM.
func TestWorkerCommand(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	store := queue.NewStore(pool, queue.Config{LeaseTTL: 3 * time.Second})
	const workerToken = "worker-token-0123456789"
	srv := httptest.NewServer(app.NewServer(app.ServerConfig{RPCToken: "full-token-0123456789", RPCWorkerToken: workerToken},
		pool, rpc.NewHandler(store, "test", nil), nil))
	t.Cleanup(srv.Close)
	bin := buildGitlease(t)
	ok := enqueueTestIssue(t, store, 1)
	bad := enqueueTestIssue(t, store, 2)

	env := append(devTestEnv(), "GITLEASE_RPC_WORKER_TOKEN="+workerToken, "GITHUB_TOKEN=worker-own-token")
	stop, log := startBinary(t, bin, env, "worker", "--url", srv.URL, "--slots", "2", "--poll", "200ms",
		"--exec", `echo "procs $(ls /proc | grep -c '^[0-9]') tmp $(ls -A /tmp | wc -l) home $(ls -A "$HOME" | wc -l)"; env | sort; sleep 4; test "$GITLEASE_ENTRY_ID" != '`+bad+`'`)
	// The commands outlive the 3s TTL: renewals over /rpc keep them.
	waitItemStatus(t, store, ok, queue.StatusCompleted, 30*time.Second)
	waitItemStatus(t, store, bad, queue.StatusFailed, 30*time.Second)
	it, err := store.Get(context.Background(), ok)
	if err != nil {
		t.Fatal(err)
	}
	tail := it.Note() // the output tail, as the check run shows it
	for _, want := range []string{"GITLEASE_ENTRY_ID=" + ok, "GITLEASE_QUALIFIED_ID=github_issue:1296269#1",
		"GITLEASE_HEAD_REF=refs/heads/gitlease/issue-1", "GITHUB_TOKEN=***", "TMPDIR=/tmp", "tmp 0 home 0"} {
		if !strings.Contains(tail, want) {
			t.Errorf("command output lacks %s:\n%s", want, tail)
		}
	}
	var procs int
	if i := strings.Index(tail, "procs "); i < 0 {
		t.Errorf("no process count in the output:\n%s", tail)
	} else if _, _ = fmt.Sscanf(tail[i:], "procs %d", &procs); procs > 6 {
		t.Errorf("the remote worker's command saw %d processes, want only its own few", procs)
	}
	if strings.Contains(tail, "GITLEASE_RPC_") || strings.Contains(tail, workerToken) || strings.Contains(log.String(), "worker-own-token") {
		t.Error("the command sees the worker's RPC token, or its GITHUB_TOKEN is logged verbatim")
	}
	if err := stop(); err != nil {
		t.Errorf("gitlease worker on SIGTERM: %v, want exit 0", err)
	}
}

func TestWorkerCommandRejectsABadToken(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	store := queue.NewStore(pool, queue.Config{})
	srv := httptest.NewServer(app.NewServer(app.ServerConfig{RPCToken: "full-token-0123456789"}, pool, rpc.NewHandler(store, "test", nil), nil))
	t.Cleanup(srv.Close)
	cmd := exec.Command(buildGitlease(t), "worker", "--url", srv.URL, "--exec", "true")
	cmd.Env = append(devTestEnv(), "GITLEASE_RPC_TOKEN=wrong-token-0123456789")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "401") {
		t.Errorf("worker with a wrong token: %v\n%s\nwant a failure naming HTTP 401", err, out)
	}
}

// TestServeBuiltinWorkerShutdown runs `gitlease serve` with the built-in
// worker: it runs an item, and on SIGTERM lets the running command finish
// within the grace period, completes its item, and exits 0.
func TestServeBuiltinWorkerShutdown(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := queue.NewStore(pool, queue.Config{})
	bin := buildGitlease(t)
	dir := t.TempDir()
	first := enqueueTestIssue(t, store, 1)
	env := append(devTestEnv(), "DATABASE_URL="+url, "PORT=0", "GITHUB_WEBHOOK_SECRET=whsec-0123456789abcdef", "GITLEASE_WORKER_SLOTS=1",
		"GITLEASE_WORKER_SANDBOX=none", // the command reports through a file the sandbox would hide
		"GITLEASE_WORKER_EXEC=touch '"+dir+"/started.'\"$GITLEASE_ENTRY_ID\"; sleep 2; echo finished")
	stop, _ := startBinary(t, bin, env, "serve")
	waitItemStatus(t, store, first, queue.StatusCompleted, 30*time.Second)

	second := enqueueTestIssue(t, store, 2)
	deadline := time.Now().Add(20 * time.Second)
	for _, err := os.Stat(filepath.Join(dir, "started."+second)); err != nil; _, err = os.Stat(filepath.Join(dir, "started."+second)) {
		if time.Now().After(deadline) {
			t.Fatal("the built-in worker did not start the second item")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Errorf("gitlease serve on SIGTERM: %v, want exit 0", err)
	}
	it, err := store.Get(context.Background(), second)
	if err != nil || it.Status() != queue.StatusCompleted || !strings.Contains(it.Note(), "finished") {
		t.Errorf("item running at SIGTERM: status %s, note %q (%v); want completed within the grace period", it.Status(), it.Note(), err)
	}
}

// TestWorkerCommandSettings: `gitlease worker` reads the environment's
// settings through serve's settings table, with its checks: an unknown
// GITLEASE_WORKER_USER or a GITLEASE_WORKER_ENV entry with a value stops it
// at start naming the setting, and GITLEASE_RPC_TOKEN_FILE gives the token
// (a wrong one is refused by the server, a right one is not).
func TestWorkerCommandSettings(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	store := queue.NewStore(pool, queue.Config{})
	srv := httptest.NewServer(app.NewServer(app.ServerConfig{RPCToken: "right-token-0123456789"}, pool, rpc.NewHandler(store, "test", nil), nil))
	t.Cleanup(srv.Close)
	bin := buildGitlease(t)
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	right, wrong := file("right", "right-token-0123456789"), file("wrong", "wrong-token-0123456789")
	cases := []struct {
		name string
		env  []string
		want string // in the output of a worker that stops at start
	}{
		{"unknown worker user", []string{"GITLEASE_RPC_TOKEN=some-token-0123456789", "GITLEASE_WORKER_USER=no-such-user-4711"},
			`gitlease: GITLEASE_WORKER_USER: no user "no-such-user-4711" on this machine`},
		{"worker env with a value", []string{"GITLEASE_RPC_TOKEN=some-token-0123456789", "GITLEASE_WORKER_ENV=A=b"},
			`gitlease: GITLEASE_WORKER_ENV: "A=b" is not a variable name`},
		{"token and its file", []string{"GITLEASE_RPC_TOKEN=some-token-0123456789", "GITLEASE_RPC_TOKEN_FILE=" + right},
			"gitlease: GITLEASE_RPC_TOKEN: set either it or GITLEASE_RPC_TOKEN_FILE, not both"},
		{"wrong token from a file", []string{"GITLEASE_RPC_TOKEN_FILE=" + wrong}, "401"},
	}
	for _, tc := range cases {
		cmd := exec.Command(bin, "worker", "--url", srv.URL, "--exec", "true")
		cmd.Env = append(devTestEnv(), tc.env...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: %v\n%s\nwant a failure saying %s", tc.name, err, out, tc.want)
		}
	}
	// The right token from its file: the worker starts, and stops on SIGTERM.
	stop, out := startBinary(t, bin, append(devTestEnv(), "GITLEASE_RPC_TOKEN_FILE="+right),
		"worker", "--url", srv.URL, "--exec", "true", "--poll", "100ms")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), `"worker started"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not start with the token from its file:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Errorf("gitlease worker on SIGTERM: %v, want exit 0\n%s", err, out.String())
	}
}
