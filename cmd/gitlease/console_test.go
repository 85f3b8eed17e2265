package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/db/dbtest"
)

// The check run as the developer's console (docs/github.md), end to end:
// serve binaries, the fake GitHub delivering webhooks to them, commands
// that print and wait.

// consoleEnv is one fake GitHub with octocat/Hello-World installed, its
// webhook pointing at the first serve started, and the environment serve
// runs with.
type consoleEnv struct {
	gh    *githubtest.Server
	db    string
	pool  *pgxpool.Pool
	bin   string
	env   []string
	serve []string
	outs  []*lockedBuffer // each serve's output
}

func newConsoleEnv(t *testing.T, exec string, extra ...string) *consoleEnv {
	t.Helper()
	e := &consoleEnv{gh: githubtest.New(t), db: dbtest.URL(t), bin: buildGitlease(t)}
	e.gh.AddRepo("octocat", "Hello-World", 1296269, "main", true)
	e.gh.AddInstallation(2311213, "octocat/Hello-World")
	e.env = append(devTestEnv(), "DATABASE_URL="+e.db, "PORT=0", "GITHUB_WEBHOOK_SECRET=whsec-console-test",
		"GITHUB_APP_ID="+fmt.Sprint(e.gh.AppID), "GITHUB_PRIVATE_KEY="+string(e.gh.PrivateKeyPEM), "GITHUB_API_URL="+e.gh.URL(),
		"GITLEASE_WORKER_EXEC="+exec)
	e.env = append(e.env, extra...)
	pool, err := pgxpool.New(context.Background(), e.db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.pool = pool
	return e
}

// start starts a serve process with extra settings; the first one started
// receives the fake's webhooks.
func (e *consoleEnv) start(t *testing.T, extra ...string) {
	t.Helper()
	stop, out := startBinary(t, e.bin, append(slices.Clone(e.env), extra...), "serve")
	t.Cleanup(func() { _ = stop() })
	url := serveURL(t, out)
	e.outs = append(e.outs, out)
	if len(e.serve) == 0 {
		e.gh.SetWebhook(url+"/webhook", "whsec-console-test")
	}
	e.serve = append(e.serve, url)
}

// deliver sends a fixture (edited) as GitHub would and returns the outcome
// gitlease recorded for it.
func (e *consoleEnv) deliver(t *testing.T, event, name string, edit func(map[string]any)) string {
	t.Helper()
	a := e.gh.Deliver(event, fixture(t, name+".json", edit))
	if a.StatusCode >= 300 {
		t.Fatalf("%s delivery answered %d", name, a.StatusCode)
	}
	return e.outcome(t, a.GUID)
}

func (e *consoleEnv) outcome(t *testing.T, deliveryID string) string {
	t.Helper()
	var outcome string
	if err := e.pool.QueryRow(context.Background(), `SELECT outcome FROM deliveries WHERE delivery_id = $1`, deliveryID).Scan(&outcome); err != nil {
		t.Fatalf("delivery %s: %v", deliveryID, err)
	}
	return outcome
}

// item is the only work item's status and end reason.
func (e *consoleEnv) item(t *testing.T) (status, reason string) {
	t.Helper()
	var r *string
	if err := e.pool.QueryRow(context.Background(), `SELECT status, e.end_reason FROM work_items w LEFT JOIN work_item_endings e ON e.entry_id = w.id`).Scan(&status, &r); err != nil {
		t.Fatal(err)
	}
	if r != nil {
		reason = *r
	}
	return status, reason
}

// run is the only check run, once it exists.
func (e *consoleEnv) run(t *testing.T, within time.Duration, cond func(githubtest.CheckRun) bool) githubtest.CheckRun {
	t.Helper()
	var got githubtest.CheckRun
	if !e.gh.Wait(within, func() bool {
		runs := e.gh.CheckRuns("octocat/Hello-World")
		if len(runs) != 1 {
			return false
		}
		got = runs[0]
		return cond(got)
	}) {
		t.Fatalf("no check run as wanted within %v; last seen %+v", within, got)
	}
	return got
}

var commandStarted = regexp.MustCompile(`"msg":"command started".*?"pid":(\d+)`)

// commandPid waits for a serve to log that it started a command and
// returns the command's process (its sandbox's, which ends with it): the
// command runs in a sandbox of its own, so it leaves no mark outside.
func (e *consoleEnv) commandPid(t *testing.T, within time.Duration) int {
	t.Helper()
	pid := 0
	if !e.gh.Wait(within, func() bool {
		for _, out := range e.outs {
			if m := commandStarted.FindStringSubmatch(out.String()); m != nil {
				pid, _ = strconv.Atoi(m[1])
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no command started within %v", within)
	}
	return pid
}

// running reports whether process pid exists (serve reaps its commands).
func running(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// waitGone waits until process pid has ended and returns when it had.
func (e *consoleEnv) waitGone(t *testing.T, pid int, within time.Duration) time.Time {
	t.Helper()
	if !e.gh.Wait(within, func() bool { return !running(pid) }) {
		t.Fatalf("the command (process %d) still runs after %v", pid, within)
	}
	return time.Now()
}

// stoppable is a command that runs ten minutes unless it is stopped.
const stoppable = `i=0; while [ $i -lt 600 ]; do i=$((i+1)); echo "waiting $i"; sleep 1; done`

func hasCancel(as []githubtest.Action) bool {
	return slices.ContainsFunc(as, func(a githubtest.Action) bool { return a.Identifier == "cancel" })
}

// TestCheckRunShowsProgress: a command printing a line a second for 40 s
// with GITLEASE_PROGRESS_INTERVAL=10s: its check run gets at least two
// progress updates, each with more output than the one before and never
// two within 10 s; the Cancel button is in the first in_progress write and
// gone in the conclusion, which says the command exited 0.
func TestCheckRunShowsProgress(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t, `i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo "line $i"; sleep 1; done`,
		"GITLEASE_PROGRESS_INTERVAL=10s")
	e.start(t)
	if got := e.deliver(t, "issues", "issues-opened", nil); got != "enqueued" {
		t.Fatalf("outcome %s", got)
	}
	cr := e.run(t, 2*time.Minute, func(cr githubtest.CheckRun) bool { return cr.Status == "completed" })
	if cr.Conclusion != "success" || !strings.Contains(cr.Summary, "Command exited 0") {
		t.Errorf("conclusion %s, summary %q", cr.Conclusion, cr.Summary)
	}
	var progress []githubtest.CheckRunWrite
	firstInProgress := -1
	for i, w := range cr.Writes {
		if w.Status == "in_progress" && firstInProgress < 0 {
			firstInProgress = i
		}
		if w.Status == "in_progress" && w.SetsText {
			progress = append(progress, w)
		}
	}
	if firstInProgress < 0 || !cr.Writes[firstInProgress].SetsActions || !hasCancel(cr.Writes[firstInProgress].Actions) {
		t.Errorf("the first in_progress write does not offer the Cancel button: %+v", cr.Writes)
	}
	last := cr.Writes[len(cr.Writes)-1]
	if last.Status != "completed" || !last.SetsActions || len(last.Actions) != 0 || len(cr.Actions) != 0 {
		t.Errorf("the conclusion left the buttons %+v (sets actions %v)", cr.Actions, last.SetsActions)
	}
	if len(progress) < 2 {
		t.Fatalf("%d progress updates, want at least 2: %+v", len(progress), cr.Writes)
	}
	for i, w := range progress {
		if !strings.Contains(w.Text, "line ") || !strings.Contains(w.Summary, "Running for") {
			t.Errorf("progress %d: text %q, summary %q", i, w.Text, w.Summary)
		}
		if i == 0 {
			continue
		}
		prev := progress[i-1]
		if gap := w.Time.Sub(prev.Time); gap < 10*time.Second {
			t.Errorf("progress updates %d and %d %v apart, want at least 10s", i-1, i, gap)
		}
		if !(strings.Count(w.Text, "\n") > strings.Count(prev.Text, "\n")) {
			t.Errorf("progress %d shows no more output than %d: %q then %q", i, i-1, prev.Text, w.Text)
		}
	}
	t.Logf("%d progress updates over a 40 s command, %d check run writes in all", len(progress), len(cr.Writes))
}

// TestCancelButtonStopsTheCommand: a stranger's /gitlease cancel is
// ignored; pressing the check run's Cancel button stops the running
// command within 5 s, and the check run concludes cancelled saying who and
// how, without the button.
func TestCancelButtonStopsTheCommand(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t, stoppable)
	e.start(t)
	e.deliver(t, "issues", "issues-opened", nil)
	pid := e.commandPid(t, time.Minute)
	cr := e.run(t, 30*time.Second, func(cr githubtest.CheckRun) bool { return cr.Status == "in_progress" && hasCancel(cr.Actions) })

	if got := e.deliver(t, "issue_comment", "issue_comment-created-none", func(m map[string]any) {
		m["comment"].(map[string]any)["body"] = "/gitlease cancel"
	}); got != "ignored" {
		t.Errorf("a stranger's /gitlease cancel: outcome %s, want ignored", got)
	}
	if st, _ := e.item(t); st != "assigned" || !running(pid) {
		t.Fatalf("after a stranger's cancel the item is %s (command running: %v)", st, running(pid))
	}

	a, err := e.gh.PressAction(cr.ID, "cancel", "octo")
	if err != nil {
		t.Fatal(err)
	}
	pressed := time.Now()
	if got := e.outcome(t, a.GUID); got != "cancelled" {
		t.Fatalf("requested_action outcome %s, want cancelled", got)
	}
	stopped := e.waitGone(t, pid, 30*time.Second)
	if d := stopped.Sub(pressed); d > 5*time.Second {
		t.Errorf("the command stopped %v after the press, want within 5s", d)
	}
	done := e.run(t, 30*time.Second, func(cr githubtest.CheckRun) bool { return cr.Status == "completed" })
	st, reason := e.item(t)
	if st != "cancelled" || reason != "Cancelled by @octo with the Cancel button" {
		t.Errorf("item %s, end reason %q", st, reason)
	}
	if done.Conclusion != "cancelled" || !strings.HasPrefix(done.Summary, "**Cancelled by @octo with the Cancel button**") || len(done.Actions) != 0 {
		t.Errorf("conclusion %s, actions %+v, summary %q", done.Conclusion, done.Actions, done.Summary)
	}
	t.Logf("stopped %v after the press", stopped.Sub(pressed).Round(time.Millisecond))
}

// TestCloseEventStopsTheCommandOnAnotherInstance: the instance that
// receives the close event runs no worker; the command runs on a second
// instance, whose lease is renewed every 10 minutes, and is stopped within
// 5 s all the same.
func TestCloseEventStopsTheCommandOnAnotherInstance(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t, stoppable)
	e.start(t, "GITLEASE_WORKER_SLOTS=0") // receives the webhooks
	e.start(t)                            // runs the command
	e.deliver(t, "issues", "issues-opened", nil)
	pid := e.commandPid(t, time.Minute)
	e.run(t, 30*time.Second, func(cr githubtest.CheckRun) bool { return cr.Status == "in_progress" })
	closed := time.Now()
	if got := e.deliver(t, "issues", "issues-closed", nil); got != "cancelled" {
		t.Fatalf("close outcome %s, want cancelled", got)
	}
	stopped := e.waitGone(t, pid, 30*time.Second)
	if d := stopped.Sub(closed); d > 5*time.Second {
		t.Errorf("the command stopped %v after the close event, want within 5s", d)
	}
	done := e.run(t, 30*time.Second, func(cr githubtest.CheckRun) bool { return cr.Status == "completed" })
	if done.Conclusion != "cancelled" || !strings.Contains(done.Summary, "@octocat closed the issue") || len(done.Actions) != 0 {
		t.Errorf("conclusion %s, actions %+v, summary %q", done.Conclusion, done.Actions, done.Summary)
	}
	t.Logf("stopped %v after the close event", stopped.Sub(closed).Round(time.Millisecond))
}
