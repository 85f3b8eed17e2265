package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitlease/gitlease/app"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/webhook"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/app/worker/sandbox"
	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/queue/rpc"
)

// These tests run real commands (sh) against a real queue in Postgres.

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testWriter sends log lines to t.Log, so they show only for failing tests.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newQueue(t *testing.T, ttl time.Duration) (*queue.Store, *pgxpool.Pool) {
	t.Helper()
	pool := dbtest.New(t)
	// Items becoming pending wake workers through NOTIFY, as in serve.
	n := NewNotifier(pool, testLogger(t))
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	// Cancels of assigned items make workers renew now, as in serve.
	cn := NewCancelNotifier(pool, testLogger(t))
	if err := cn.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cn.Stop)
	return queue.NewStore(pool, queue.Config{LeaseTTL: ttl, OnPending: n.Signal, OnCancel: cn.Signal, Views: outbox.NewItems(pool)}), pool
}

// issueItem enqueues an issue item; with gh, its dispatch carries the
// GitHub metadata the webhook intake writes, which makes the worker wait
// for its branch and pull request.
func issueItem(t *testing.T, store *queue.Store, n int, gh bool) queue.EnqueueResult {
	t.Helper()
	ref := &queue.SubjectRef{Kind: webhook.KindIssue, ID: fmt.Sprintf("1296269#%d", n), Title: fmt.Sprintf("Issue %d", n)}
	if gh {
		ref.Metadata = json.RawMessage(fmt.Sprintf(`{"installation_id":7,"repository_id":1296269,"repository":"acme/widgets",`+
			`"number":%d,"html_url":"https://github.com/acme/widgets/issues/%d"}`, n, n))
	}
	res, err := store.Enqueue(context.Background(), queue.EnqueueParams{
		Dispatch: queue.SubjectDispatch{
			Subject: ref, WorkflowRef: "coding", TriggerSource: "test",
			RequestedAt: queue.Timestamp{Time: time.Now().UTC().Truncate(time.Second)},
		},
		Reservation: &queue.Reservation{Repository: "acme/widgets", BaseRef: "refs/heads/main",
			HeadRef: fmt.Sprintf("refs/heads/gitlease/issue-%d", n)},
		FromGitHub: gh, // with GitHub metadata, as the webhook intake enqueues it
	})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return res
}

// script writes a shell script and returns the Exec that runs it.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "job.sh")
	if err := os.WriteFile(p, []byte("set -e\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return "sh '" + p + "'"
}

func startWorker(t *testing.T, store *queue.Store, pool *pgxpool.Pool, cfg WorkerConfig) *Worker {
	t.Helper()
	return startWorkerWith(t, store, pool, nil, cfg)
}

// startWorkerWith starts a built-in worker that hands out installation
// tokens from gh (none when nil) and stops it when the test ends.
func startWorkerWith(t *testing.T, store *queue.Store, pool *pgxpool.Pool, gh *github.Installations, cfg WorkerConfig) *Worker {
	t.Helper()
	if cfg.OwnerID == "" {
		cfg.OwnerID = BuiltinOwnerPrefix + "test-" + uuid.NewString()[:8]
	}
	if cfg.Slots == 0 {
		cfg.Slots = 1
	}
	if cfg.Sandbox == "" {
		// These tests talk with the command through files in t.TempDir(),
		// which the sandbox hides; the sandbox's own tests ask for it.
		cfg.Sandbox = sandbox.None
	}
	w, err := NewWorker(store, pool, gh, cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func getItem(t *testing.T, store *queue.Store, id string) queue.Item {
	t.Helper()
	it, err := store.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return it
}

func waitStatus(t *testing.T, store *queue.Store, id, status string, within time.Duration) queue.Item {
	t.Helper()
	var it queue.Item
	eventually(t, within, "item "+id+" "+status, func() bool {
		it = getItem(t, store, id)
		return it.Status() == status
	})
	return it
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func auditReasons(t *testing.T, pool *pgxpool.Pool, id string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT coalesce(reason, '') FROM work_item_audit WHERE entry_id = $1 ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	reasons, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return reasons
}

func readEnv(t *testing.T, p string) map[string]string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	return env
}

func TestWorkerCompletesOnExitZero(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Minute)
	dir := t.TempDir()
	it := issueItem(t, store, 1, false)
	startWorker(t, store, pool, WorkerConfig{Exec: script(t, `echo "all good"; touch '`+dir+`/ran'`)})
	got := waitStatus(t, store, it.EntryID, queue.StatusCompleted, 15*time.Second)
	if !fileExists(dir + "/ran") {
		t.Error("the command did not run")
	}
	if !strings.Contains(got.Note(), "all good") {
		t.Errorf("note = %q, want the output", got.Note())
	}
}

// TestWorkerTimeout: a sandboxed command running past Timeout is ended,
// with what it left running, and its item fails with the note the check
// run concludes timed_out on.
func TestWorkerTimeout(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Minute)
	it := issueItem(t, store, 1, false)
	startWorker(t, store, pool, WorkerConfig{Sandbox: sandbox.Auto, Timeout: time.Second, KillAfter: time.Second,
		Exec: "echo begun; setsid sleep 6005 & exec sleep 6004"})
	got := waitStatus(t, store, it.EntryID, queue.StatusFailed, 30*time.Second)
	if !strings.HasPrefix(got.Note(), queue.NoteTimedOut+" after 1s") || !strings.Contains(got.Note(), "begun") {
		t.Errorf("note = %q, want it to start %q and keep the output", got.Note(), queue.NoteTimedOut)
	}
	if out, _ := exec.Command("pgrep", "-af", "^sleep 600[45]$").Output(); len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("processes of the timed-out command are left: %s", out)
	}
}

func TestWorkerFailsOnNonZeroExitWithOutputTail(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Minute)
	it := issueItem(t, store, 1, false)
	startWorker(t, store, pool, WorkerConfig{Exec: script(t, "echo to-stdout\necho to-stderr >&2\nexit 3\n")})
	got := waitStatus(t, store, it.EntryID, queue.StatusFailed, 15*time.Second)
	for _, want := range []string{"to-stdout", "to-stderr", "exit status 3"} {
		if !strings.Contains(got.Note(), want) {
			t.Errorf("note = %q, want it to contain %q", got.Note(), want)
		}
	}
}

func TestWorkerKeepsOnlyTheOutputTail(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Minute)
	it := issueItem(t, store, 1, false)
	startWorker(t, store, pool, WorkerConfig{OutputTail: 200,
		Exec: script(t, "i=0\nwhile [ $i -lt 500 ]; do echo \"line $i\"; i=$((i+1)); done\nprintf 'bad\\377byte\\n'\n")})
	got := waitStatus(t, store, it.EntryID, queue.StatusCompleted, 15*time.Second)
	note := got.Note()
	if len(note) > 200 || !strings.HasSuffix(note, "badbyte") || !strings.Contains(note, "line 499") || strings.Contains(note, "line 1\n") {
		t.Errorf("note = %q, want at most 200 bytes ending with the last lines, invalid UTF-8 dropped", note)
	}
	if !strings.HasPrefix(note, "line ") {
		t.Errorf("note = %q, want it to start at a line", note)
	}
}

func TestWorkerEnvironment(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Minute)
	dir := t.TempDir()
	it := issueItem(t, store, 4, false)
	base := append(os.Environ(),
		"DATABASE_URL=postgres://u:secret@db/x", "GITHUB_PRIVATE_KEY=-----BEGIN", "GITHUB_PRIVATE_KEY_FILE=/k.pem",
		"GITHUB_WEBHOOK_SECRET=whsec", "GITLEASE_RPC_TOKEN=rpctok", "GITHUB_APP_ID=12", "GITHUB_TOKEN=ambient",
		"GITLEASE_WORKER_EXEC=x", "KEEP_ME=kept", "NOT_LISTED=dropped")
	startWorker(t, store, pool, WorkerConfig{Env: base, PassEnv: []string{"KEEP_ME"},
		Exec: script(t, "env > '"+dir+"/env'\nprintf '%s' \"$GITLEASE_DISPATCH\" > '"+dir+"/dispatch'\n"+
			"stat -c %a \"$GITLEASE_DISPATCH_FILE\" > '"+dir+"/mode'\ncmp \"$GITLEASE_DISPATCH_FILE\" '"+dir+"/dispatch'\n")})
	done := waitStatus(t, store, it.EntryID, queue.StatusCompleted, 15*time.Second)
	env := readEnv(t, dir+"/env")
	f := done.Fence()
	want := map[string]string{
		"GITLEASE_ENTRY_ID":     it.EntryID,
		"GITLEASE_QUALIFIED_ID": "github_issue:1296269#4",
		"GITLEASE_GENERATION":   "1",
		"GITLEASE_WORKFLOW_ID":  f.WorkflowID,
		"GITLEASE_REPOSITORY":   "acme/widgets",
		"GITLEASE_BASE_REF":     "refs/heads/main",
		"GITLEASE_HEAD_REF":     "refs/heads/gitlease/issue-4",
		"GITLEASE_HEAD_SHA":     "",
		"KEEP_ME":               "kept",
	}
	for k, v := range want {
		if got, ok := env[k]; !ok || got != v {
			t.Errorf("%s = %q (set: %v), want %q", k, got, ok, v)
		}
	}
	for _, k := range []string{"DATABASE_URL", "GITHUB_PRIVATE_KEY", "GITHUB_PRIVATE_KEY_FILE", "GITHUB_WEBHOOK_SECRET",
		"GITLEASE_RPC_TOKEN", "GITHUB_APP_ID", "GITHUB_TOKEN", "GITLEASE_WORKER_EXEC", "NOT_LISTED"} {
		if v, ok := env[k]; ok {
			t.Errorf("the command sees %s=%q", k, v)
		}
	}
	b, err := os.ReadFile(dir + "/dispatch")
	if err != nil {
		t.Fatal(err)
	}
	var d queue.SubjectDispatch
	if err := json.Unmarshal(b, &d); err != nil || d.Subject == nil || d.Subject.ID != "1296269#4" {
		t.Errorf("GITLEASE_DISPATCH = %s (%v), want the dispatch", b, err)
	}
	if mode, _ := os.ReadFile(dir + "/mode"); strings.TrimSpace(string(mode)) != "600" {
		t.Errorf("GITLEASE_DISPATCH_FILE mode %q, want 600", mode)
	}
	if p := env["GITLEASE_DISPATCH_FILE"]; p == "" || fileExists(p) {
		t.Errorf("GITLEASE_DISPATCH_FILE %q not set, or not removed after the command", p)
	}
}

func TestItemEnvForPullRequests(t *testing.T) {
	t.Parallel()
	f := queue.Fence{WorkflowID: "wf", QueueLease: &queue.LeaseFence{EntryID: "e"},
		Subject: &queue.SubjectGeneration{QualifiedID: "github_pull_request:9#5", Generation: 2}}
	meta := webhook.ItemMeta{Kind: webhook.KindPullRequest, Metadata: webhook.Metadata{InstallationID: 77, Repository: "o/r", Number: 5,
		HTMLURL: "https://github.com/o/r/pull/5", HeadSHA: "abc"}}
	env := map[string]string{}
	for _, kv := range itemEnv(f, json.RawMessage(`{}`), meta, nil) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	want := map[string]string{"GITLEASE_PR_NUMBER": "5", "GITLEASE_PR_URL": "https://github.com/o/r/pull/5",
		"GITLEASE_HEAD_SHA": "abc", "GITLEASE_INSTALLATION_ID": "77", "GITLEASE_REPOSITORY": "o/r", "GITLEASE_GENERATION": "2"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
}

func TestWorkerWaitsForProvisioning(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Minute)
	dir := t.TempDir()
	it := issueItem(t, store, 8, true)
	startWorker(t, store, pool, WorkerConfig{ProvisionWait: time.Minute, Exec: script(t, "env > '"+dir+"/env'\n")})
	eventually(t, 10*time.Second, "item leased", func() bool { return getItem(t, store, it.EntryID).Status() == queue.StatusAssigned })
	time.Sleep(1500 * time.Millisecond)
	if fileExists(dir + "/env") {
		t.Fatal("the command ran before the branch was provisioned")
	}
	// What the outbox sender records once GitHub has the branch and PR.
	n := int32(12)
	_, err := dbq.New().GitHubItemRecordProvisioning(context.Background(), pool, dbq.GitHubItemRecordProvisioningParams{
		EntryID: uuid.MustParse(it.EntryID), LeaseGeneration: 1, Branch: "gitlease/issue-8", HeadSha: "deadbeef",
		PrNumber: n, PrUrl: "https://github.com/acme/widgets/pull/12",
	})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, store, it.EntryID, queue.StatusCompleted, 15*time.Second)
	env := readEnv(t, dir+"/env")
	for k, v := range map[string]string{"GITLEASE_HEAD_SHA": "deadbeef", "GITLEASE_PR_NUMBER": "12",
		"GITLEASE_PR_URL": "https://github.com/acme/widgets/pull/12", "GITLEASE_INSTALLATION_ID": "7"} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
}

func TestWorkerRunsWithoutProvisioningAfterTheWait(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Minute)
	it := issueItem(t, store, 9, true)
	startWorker(t, store, pool, WorkerConfig{ProvisionWait: time.Second, Exec: script(t, `test -z "$GITLEASE_HEAD_SHA"`)})
	waitStatus(t, store, it.EntryID, queue.StatusCompleted, 15*time.Second)
}

func TestWorkerWithoutExecCompletes(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Minute)
	it := issueItem(t, store, 1, false)
	startWorker(t, store, pool, WorkerConfig{})
	waitStatus(t, store, it.EntryID, queue.StatusCompleted, 15*time.Second)
}

func TestWorkerRenewsPastTheTTL(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, 3*time.Second)
	it := issueItem(t, store, 1, false)
	startWorker(t, store, pool, WorkerConfig{Exec: "sleep 5"})
	eventually(t, 10*time.Second, "item leased", func() bool { return getItem(t, store, it.EntryID).Status() == queue.StatusAssigned })
	time.Sleep(4 * time.Second) // past the first expiry
	got := getItem(t, store, it.EntryID)
	if got.Status() != queue.StatusAssigned || !got.Fence().QueueLease.ExpiresAt.After(time.Now()) {
		t.Fatalf("after 4s: status %s, expires %v; want a live renewed lease", got.Status(), got.Fence().QueueLease.ExpiresAt)
	}
	if exp, err := store.ExpiredLeases(context.Background(), BuiltinOwnerPrefix, 10); err != nil || len(exp) != 0 {
		t.Fatalf("expired leases = %d (%v), want none", len(exp), err)
	}
	done := waitStatus(t, store, it.EntryID, queue.StatusCompleted, 15*time.Second)
	if g := done.Fence().QueueLease.Generation; g != 1 {
		t.Errorf("lease generation = %d, want 1 (never recovered)", g)
	}
}

func TestWorkerStopsTheCommandWhenTheSubjectCloses(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, 3*time.Second)
	dir := t.TempDir()
	it := issueItem(t, store, 1, false)
	w := startWorker(t, store, pool, WorkerConfig{Grace: time.Minute,
		Exec: script(t, "touch '"+dir+"/started'\nsleep 60\ntouch '"+dir+"/finished'\n")})
	eventually(t, 10*time.Second, "command started", func() bool { return fileExists(dir + "/started") })
	err := store.InTx(context.Background(), func(ctx context.Context, tx pgx.Tx) error {
		_, err := store.CancelSubjectTx(ctx, tx, "github_issue:1296269#1", "")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, store, it.EntryID, queue.StatusCancelled, 10*time.Second)
	eventually(t, 10*time.Second, "slot freed", func() bool { return !w.Running(it.EntryID) })
	// The command was stopped, not left to the grace period of a minute.
	start := time.Now()
	w.Stop()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Stop took %v: the cancelled command was still running", d)
	}
	if fileExists(dir + "/finished") {
		t.Error("the command ran to its end")
	}
	if got := getItem(t, store, it.EntryID); got.Status() != queue.StatusCancelled {
		t.Errorf("status = %s, want cancelled", got.Status())
	}
}

// TestWorkerStopsACancelledCommandAtOnce: with a lease of 30 minutes (a
// renew every 10), cancelling an assigned item from another store (another
// serve instance: the NOTIFY crosses the database) stops its command, one
// that ignores SIGTERM, within 5 seconds, and the item ends cancelled with the reason it was
// cancelled with.
func TestWorkerStopsACancelledCommandAtOnce(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, 30*time.Minute)
	dir := t.TempDir()
	it := issueItem(t, store, 1, false)
	// It ignores SIGTERM, and has a KillAfter of a minute: a cancel ends
	// it all the same, within seconds.
	w := startWorker(t, store, pool, WorkerConfig{Grace: time.Minute, KillAfter: time.Minute,
		Exec: script(t, "trap '' TERM\ntouch '"+dir+"/started'\nsleep 60\ntouch '"+dir+"/finished'\n")})
	eventually(t, 10*time.Second, "command started", func() bool { return fileExists(dir + "/started") })
	cn := NewCancelNotifier(pool, testLogger(t))
	if err := cn.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer cn.Stop()
	other := queue.NewStore(pool, queue.Config{LeaseTTL: 30 * time.Minute, OnCancel: cn.Signal})
	start := time.Now()
	err := other.InTx(context.Background(), func(ctx context.Context, tx pgx.Tx) error {
		res, err := other.CancelEntryTx(ctx, tx, uuid.MustParse(it.EntryID), "Cancelled by @octo with the Cancel button")
		if err == nil && len(res.Requested) != 1 {
			err = fmt.Errorf("cancel asked %d items to stop, want 1", len(res.Requested))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	done := waitStatus(t, store, it.EntryID, queue.StatusCancelled, 10*time.Second)
	eventually(t, 10*time.Second, "slot freed", func() bool { return !w.Running(it.EntryID) })
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the cancelled command stopped after %v, want within 5s", d)
	}
	if fileExists(dir + "/finished") {
		t.Error("the command ran to its end")
	}
	if end, err := queue.ReadEnding(context.Background(), pool, done.ID()); err != nil || end.Reason != "Cancelled by @octo with the Cancel button" {
		t.Errorf("ending %+v, %v", end, err)
	}
}

func TestWorkerNeverRunsMoreThanItsSlots(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Minute)
	dir := t.TempDir()
	var ids []string
	for n := 1; n <= 5; n++ {
		ids = append(ids, issueItem(t, store, n, false).EntryID)
	}
	// Each command counts the running commands, itself included.
	startWorker(t, store, pool, WorkerConfig{Slots: 2, Poll: time.Minute, Exec: script(t, `
touch '`+dir+`/run.'"$GITLEASE_ENTRY_ID"
ls '`+dir+`' | grep -c '^run\.' >> '`+dir+`/counts'
sleep 0.5
rm '`+dir+`/run.'"$GITLEASE_ENTRY_ID"
`)})
	for _, id := range ids {
		waitStatus(t, store, id, queue.StatusCompleted, 30*time.Second)
	}
	b, err := os.ReadFile(dir + "/counts")
	if err != nil {
		t.Fatal(err)
	}
	peak := 0
	for _, l := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(l)
		peak = max(peak, n)
	}
	if peak != 2 {
		t.Errorf("at most %d commands ran at once (counts %q), want 2", peak, b)
	}
}

func TestWorkerWakesOnNotify(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Minute)
	startWorker(t, store, pool, WorkerConfig{Poll: time.Minute, Exec: "true"})
	time.Sleep(300 * time.Millisecond) // the first lease found nothing
	it := issueItem(t, store, 1, false)
	// Well before the one-minute poll: woken by NOTIFY gitlease_work.
	waitStatus(t, store, it.EntryID, queue.StatusCompleted, 10*time.Second)
}

func TestWorkerShutdownReleasesRunningItems(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Minute)
	dir := t.TempDir()
	long := issueItem(t, store, 1, false)
	w := startWorker(t, store, pool, WorkerConfig{Grace: 500 * time.Millisecond, KillAfter: time.Second,
		Exec: script(t, "touch '"+dir+"/started'\nsleep 60\n")})
	eventually(t, 10*time.Second, "command started", func() bool { return fileExists(dir + "/started") })
	start := time.Now()
	w.Stop()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Stop took %v", d)
	}
	got := getItem(t, store, long.EntryID)
	if got.Status() != queue.StatusPending {
		t.Fatalf("status = %s, want pending", got.Status())
	}
	if r := auditReasons(t, pool, long.EntryID); len(r) == 0 || r[len(r)-1] != ReasonShutdown {
		t.Errorf("audit reasons = %q, want a release for %q", r, ReasonShutdown)
	}
	w.Stop() // idempotent
}

func TestWorkerShutdownLetsCommandsFinishWithinGrace(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Minute)
	dir := t.TempDir()
	it := issueItem(t, store, 1, false)
	w := startWorker(t, store, pool, WorkerConfig{Grace: 20 * time.Second,
		Exec: script(t, "touch '"+dir+"/started'\nsleep 1\necho finished\n")})
	eventually(t, 10*time.Second, "command started", func() bool { return fileExists(dir + "/started") })
	w.Stop()
	got := getItem(t, store, it.EntryID)
	if got.Status() != queue.StatusCompleted || !strings.Contains(got.Note(), "finished") {
		t.Fatalf("status = %s, note %q; want completed with the output", got.Status(), got.Note())
	}
	// Nothing is leased after Stop.
	next := issueItem(t, store, 2, false)
	time.Sleep(time.Second)
	if s := getItem(t, store, next.EntryID).Status(); s != queue.StatusPending {
		t.Errorf("an item enqueued after Stop is %s, want pending", s)
	}
}

func TestWorkerConfigValidation(t *testing.T) {
	t.Parallel()
	for _, cfg := range []WorkerConfig{{Slots: 0, OwnerID: "o"}, {Slots: 6, OwnerID: "o"}, {Slots: 1}} {
		if _, err := newWorker(nil, cfg, nil); err == nil {
			t.Errorf("newWorker(%+v) succeeded, want an error", cfg)
		}
	}
	if _, err := NewRemoteWorker(nil, WorkerConfig{Slots: 1, OwnerID: BuiltinOwnerPrefix + "x"}, nil); err == nil {
		t.Error("a remote worker may not use the built-in owner prefix")
	}
}

func TestChildEnvIsAnAllowList(t *testing.T) {
	t.Parallel()
	base := []string{"PATH=/bin", "DATABASE_URL=x", "GITLEASE_RPC_TOKEN=t", "GITLEASE_ENTRY_ID=stale", "GITHUB_TOKEN=g",
		"PGPASSWORD=p", "HOME=/root", "AGENT_KEY=k", "MY_SECRET=s", "LANG=C", "PATH=/second"}
	cases := []struct {
		name string
		pass []string
		item []string
		want string
	}{
		{"built in", nil, []string{"GITLEASE_ENTRY_ID=new"}, "PATH=/bin LANG=C GITLEASE_ENTRY_ID=new"},
		{"passed names", []string{"AGENT_KEY"}, nil, "PATH=/bin AGENT_KEY=k LANG=C"},
		{"remote keeps its token", []string{"GITHUB_TOKEN"}, nil, "PATH=/bin GITHUB_TOKEN=g LANG=C"},
	}
	for _, tc := range cases {
		if got := strings.Join(childEnv(base, tc.pass, tc.item), " "); got != tc.want {
			t.Errorf("%s: env = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// newRPCQueue is newQueue behind a real /rpc endpoint, with a client of it.
func newRPCQueue(t *testing.T, ttl time.Duration) (*queue.Store, *pgxpool.Pool, *rpc.Client) {
	t.Helper()
	store, pool := newQueue(t, ttl)
	srv := httptest.NewServer(app.NewServer(app.ServerConfig{RPCToken: "tok"}, pool, rpc.NewHandler(store, "test", nil), nil))
	t.Cleanup(srv.Close)
	client, err := rpc.NewClient(srv.URL+"/rpc", "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	return store, pool, client
}

// TestRemoteWorkerOverRPC runs the remote worker loop in-process against a
// real /rpc endpoint: lease, renew, provisioning wait and completion all go
// over JSON-RPC.
func TestRemoteWorkerOverRPC(t *testing.T) {
	t.Parallel()
	store, pool, client := newRPCQueue(t, 3*time.Second)
	dir := t.TempDir()
	ok := issueItem(t, store, 1, false)
	bad := issueItem(t, store, 2, false)
	prov := issueItem(t, store, 3, true)
	w, err := NewRemoteWorker(client, WorkerConfig{Slots: 3, OwnerID: "remote-test", Poll: 200 * time.Millisecond, Sandbox: sandbox.None,
		Env: append(os.Environ(), "GITHUB_TOKEN=from-my-env", "DATABASE_URL=nope"),
		Exec: script(t, `env > '`+dir+`/env.'"$GITLEASE_ENTRY_ID"
sleep 4
test "$GITLEASE_ENTRY_ID" != '`+bad.EntryID+`'
`)}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	eventually(t, 10*time.Second, "issue item leased", func() bool { return getItem(t, store, prov.EntryID).Status() == queue.StatusAssigned })
	n := int32(3)
	if _, err := dbq.New().GitHubItemRecordProvisioning(context.Background(), pool, dbq.GitHubItemRecordProvisioningParams{
		EntryID: uuid.MustParse(prov.EntryID), LeaseGeneration: 1, Branch: "gitlease/issue-3", HeadSha: "cafe",
		PrNumber: n, PrUrl: "https://github.com/acme/widgets/pull/3",
	}); err != nil {
		t.Fatal(err)
	}
	// The commands outlive the 3s TTL: only renewals over /rpc keep them.
	waitStatus(t, store, ok.EntryID, queue.StatusCompleted, 20*time.Second)
	waitStatus(t, store, bad.EntryID, queue.StatusFailed, 20*time.Second)
	done := waitStatus(t, store, prov.EntryID, queue.StatusCompleted, 20*time.Second)
	if g := done.Fence().QueueLease.Generation; g != 1 {
		t.Errorf("lease generation = %d, want 1", g)
	}
	env := readEnv(t, dir+"/env."+ok.EntryID)
	if env["GITHUB_TOKEN"] != "from-my-env" || env["GITLEASE_ENTRY_ID"] != ok.EntryID {
		t.Errorf("env GITHUB_TOKEN=%q GITLEASE_ENTRY_ID=%q", env["GITHUB_TOKEN"], env["GITLEASE_ENTRY_ID"])
	}
	if _, set := env["DATABASE_URL"]; set {
		t.Error("the command sees DATABASE_URL")
	}
	if got := readEnv(t, dir+"/env."+prov.EntryID)["GITLEASE_HEAD_SHA"]; got != "cafe" {
		t.Errorf("provisioned GITLEASE_HEAD_SHA = %q, want cafe", got)
	}
}

// TestRemoteWorkerRunsRPCIssueItemsWithoutWaiting: an issue item enqueued
// over /rpc with github_issue metadata gets no branch (SPEC §7), and the
// remote worker, which reads its origin off gitlease/entry/get's
// from_github, runs its command at once, without GITHUB_TOKEN; an item
// from a webhook still waits for its branch.
func TestRemoteWorkerRunsRPCIssueItemsWithoutWaiting(t *testing.T) {
	t.Parallel()
	store, pool, client := newRPCQueue(t, time.Minute)
	ctx := context.Background()
	var viaRPC queue.EnqueueResult
	if err := client.Call(ctx, "queue/v2/enqueue", map[string]any{
		"subject_dispatch": map[string]any{
			"subject": map[string]any{"kind": webhook.KindIssue, "id": "1296269#4", "title": "Issue 4", "metadata": map[string]any{
				"installation_id": 7, "repository_id": 1296269, "repository": "acme/widgets", "number": 4,
				"html_url": "https://github.com/acme/widgets/issues/4"}},
			"workflow_ref": "coding", "trigger_source": "github:issues.opened", "requested_at": "2026-10-01T11:59:58Z",
		},
		"repository": map[string]any{"repository": "acme/widgets", "base_ref": "refs/heads/main", "head_ref": "refs/heads/gitlease/issue-4"},
	}, &viaRPC); err != nil {
		t.Fatal(err)
	}
	viaWebhook := issueItem(t, store, 5, true)
	for id, want := range map[string]bool{viaRPC.EntryID: false, viaWebhook.EntryID: true} {
		if v, err := client.Entry(ctx, id); err != nil || v.FromGitHub == nil || *v.FromGitHub != want {
			t.Fatalf("entry/get of %s: from_github %v (%v), want %t", id, v.FromGitHub, err, want)
		}
	}
	dir := t.TempDir()
	// The wait would outlast the test: only not waiting completes the item.
	w, err := NewRemoteWorker(client, WorkerConfig{Slots: 2, OwnerID: "remote-test", Poll: 200 * time.Millisecond, ProvisionWait: time.Hour, Sandbox: sandbox.None,
		Env:  []string{"PATH=" + os.Getenv("PATH")}, // a worker host without a GITHUB_TOKEN of its own
		Exec: script(t, `env > '`+dir+`/env.'"$GITLEASE_ENTRY_ID"`+"\n")}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	waitStatus(t, store, viaRPC.EntryID, queue.StatusCompleted, 20*time.Second)
	env := readEnv(t, dir+"/env."+viaRPC.EntryID)
	if _, set := env["GITHUB_TOKEN"]; set || env["GITLEASE_ENTRY_ID"] != viaRPC.EntryID || env["GITLEASE_HEAD_SHA"] != "" {
		t.Errorf("the RPC item's command env: GITHUB_TOKEN set %t, GITLEASE_ENTRY_ID %q, GITLEASE_HEAD_SHA %q", set, env["GITLEASE_ENTRY_ID"], env["GITLEASE_HEAD_SHA"])
	}
	waitStatus(t, store, viaWebhook.EntryID, queue.StatusAssigned, 20*time.Second)
	if fileExists(dir + "/env." + viaWebhook.EntryID) {
		t.Fatal("the webhook item's command ran before its branch was provisioned")
	}
	if _, err := dbq.New().GitHubItemRecordProvisioning(ctx, pool, dbq.GitHubItemRecordProvisioningParams{
		EntryID: uuid.MustParse(viaWebhook.EntryID), LeaseGeneration: 1, Branch: "gitlease/issue-5", HeadSha: "cafe",
		PrNumber: 5, PrUrl: "https://github.com/acme/widgets/pull/5",
	}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, store, viaWebhook.EntryID, queue.StatusCompleted, 20*time.Second)
	if got := readEnv(t, dir+"/env."+viaWebhook.EntryID)["GITLEASE_HEAD_SHA"]; got != "cafe" {
		t.Errorf("the webhook item's GITLEASE_HEAD_SHA = %q, want cafe", got)
	}
}

// TestRemoteWorkerShutdownReleases: a remote worker stopped mid-command
// releases its item over /rpc.
func TestRemoteWorkerShutdownReleases(t *testing.T) {
	t.Parallel()
	store, _, client := newRPCQueue(t, time.Minute)
	dir := t.TempDir()
	it := issueItem(t, store, 1, false)
	w, err := NewRemoteWorker(client, WorkerConfig{Slots: 1, OwnerID: "remote-test", Grace: 200 * time.Millisecond, Sandbox: sandbox.None,
		Exec: script(t, "touch '"+dir+"/started'\nsleep 60\n")}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "command started", func() bool { return fileExists(dir + "/started") })
	w.Stop()
	if s := getItem(t, store, it.EntryID).Status(); s != queue.StatusPending {
		t.Errorf("status = %s, want pending", s)
	}
}

// TestWorkerEndToEndWithGitHub runs the built-in worker with the outbox
// sender against the fake GitHub: an issue item is leased, its branch,
// draft pull request and in-progress check run appear, the command runs on
// them with an installation token, and its exit status concludes the check
// run (success for 0, failure for 1, with the output tail).
func TestWorkerEndToEndWithGitHub(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t, githubtest.ForbidRefUpdates())
	gh.AddRepo("octo", "widgets", 1296269, "main", true)
	gh.AddInstallation(4242, "octo/widgets")
	pool := dbtest.New(t)
	store := queue.NewStore(pool, queue.Config{LeaseTTL: 10 * time.Second, Observer: outbox.NewOutbox(nil, testLogger(t)), Views: outbox.NewItems(pool)})
	inst, err := github.NewInstallations(github.Config{AppID: gh.AppID, PrivateKey: gh.PrivateKeyPEM, APIURL: gh.URL()})
	if err != nil {
		t.Fatal(err)
	}
	sender := outbox.NewSender(pool, inst, outbox.SenderConfig{Poll: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}, testLogger(t))
	if err := sender.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sender.Stop) // after the worker's cleanup: the sender stops last

	enqueue := func(n int) string {
		meta, _ := json.Marshal(map[string]any{"installation_id": 4242, "repository_id": 1296269, "repository": "octo/widgets",
			"number": n, "html_url": fmt.Sprintf("https://github.com/octo/widgets/issues/%d", n)})
		res, err := store.Enqueue(context.Background(), queue.EnqueueParams{
			Dispatch: queue.SubjectDispatch{
				Subject:     &queue.SubjectRef{Kind: webhook.KindIssue, ID: fmt.Sprintf("1296269#%d", n), Title: fmt.Sprintf("Fix thing %d", n), Metadata: meta},
				WorkflowRef: "coding", TriggerSource: "github:issues.opened", RequestedAt: queue.Timestamp{Time: time.Now().UTC().Truncate(time.Second)},
			},
			Reservation: &queue.Reservation{Repository: "octo/widgets", BaseRef: "refs/heads/main", HeadRef: fmt.Sprintf("refs/heads/gitlease/issue-%d", n)},
			FromGitHub:  true,
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.EntryID
	}
	runFor := func(id string) (githubtest.CheckRun, bool) {
		for _, cr := range gh.CheckRuns("octo/widgets") {
			if cr.ExternalID == id {
				return cr, true
			}
		}
		return githubtest.CheckRun{}, false
	}

	dir := t.TempDir()
	ok, bad := enqueue(1), enqueue(2)
	startWorkerWith(t, store, pool, inst, WorkerConfig{Slots: 2, Poll: 200 * time.Millisecond, Exec: script(t, `
env > '`+dir+`/tmp.'"$GITLEASE_ENTRY_ID"
mv '`+dir+`/tmp.'"$GITLEASE_ENTRY_ID" '`+dir+`/env.'"$GITLEASE_ENTRY_ID"
while [ ! -f '`+dir+`/go' ]; do sleep 0.05; done
echo "worked on $GITLEASE_HEAD_REF"
test "$GITLEASE_ENTRY_ID" != '`+bad+`'
`)})
	eventually(t, 30*time.Second, "both commands running", func() bool {
		return fileExists(dir+"/env."+ok) && fileExists(dir+"/env."+bad)
	})
	for _, id := range []string{ok, bad} {
		if !gh.Wait(10*time.Second, func() bool { cr, found := runFor(id); return found && cr.Status == "in_progress" }) {
			t.Fatalf("no in-progress check run for %s while its command runs", id)
		}
	}
	env := readEnv(t, dir+"/env."+ok)
	sha, found := gh.Branch("octo/widgets", "gitlease/issue-1")
	if !found || env["GITLEASE_HEAD_SHA"] != sha {
		t.Errorf("GITLEASE_HEAD_SHA = %q, branch head %q (%v)", env["GITLEASE_HEAD_SHA"], sha, found)
	}
	var pr *githubtest.PullRequest
	for _, p := range gh.PullRequests("octo/widgets") {
		if p.Head == "gitlease/issue-1" {
			pr = &p
		}
	}
	if pr == nil || !pr.Draft || env["GITLEASE_PR_NUMBER"] != strconv.Itoa(pr.Number) || env["GITLEASE_INSTALLATION_ID"] != "4242" {
		t.Errorf("pull request %+v; env PR %q, installation %q", pr, env["GITLEASE_PR_NUMBER"], env["GITLEASE_INSTALLATION_ID"])
	}
	issued := false
	for _, tok := range gh.Tokens() {
		issued = issued || (tok.Token == env["GITHUB_TOKEN"] && tok.InstallationID == 4242)
	}
	if !issued {
		t.Errorf("GITHUB_TOKEN %q is not an installation token the fake issued", env["GITHUB_TOKEN"])
	}

	if err := os.WriteFile(dir+"/go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, store, ok, queue.StatusCompleted, 15*time.Second)
	waitStatus(t, store, bad, queue.StatusFailed, 15*time.Second)
	for id, want := range map[string]string{ok: "success", bad: "failure"} {
		if !gh.Wait(15*time.Second, func() bool { cr, _ := runFor(id); return cr.Status == "completed" }) {
			t.Fatalf("check run of %s not concluded", id)
		}
		cr, _ := runFor(id)
		if cr.Conclusion != want || !strings.Contains(cr.Summary, "worked on refs/heads/gitlease/issue-") {
			t.Errorf("check run of %s: %s/%s, summary %q; want %s with the output tail", id, cr.Status, cr.Conclusion, cr.Summary, want)
		}
	}
	if v := gh.Violations(); len(v) != 0 {
		t.Errorf("GitHub violations: %+v", v)
	}
}
