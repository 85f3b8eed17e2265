package ui

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
)

// chromium finds Debian's chromium (or another Chrome). Outside CI a
// missing browser skips the browser tests with one line saying how to get
// it; under CI=true it fails them.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed; the dashboard's browser tests need it (apt-get install -y chromium)")
	}
	t.Skip("chromium not found: install it (apt-get install -y chromium) to run the dashboard's browser tests")
	return ""
}

// startChromium starts a headless browser at path with one tab, stopped
// when the test ends.
func startChromium(t *testing.T, path string) context.Context {
	t.Helper()
	actx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless, chromedp.WindowSize(1360, 900),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // start the browser and its tab
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// screenshot writes the tab's whole page to file as a PNG.
func screenshot(t *testing.T, ctx context.Context, file string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", file, err)
	}
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// seedDemo fills the database with what the screenshots show: items in
// each state, deliveries of each outcome, GitHub writes done, pending and
// refused, and a lease owner. It returns a pending item's entry ID.
func seedDemo(t *testing.T, f *fixture) string {
	ctx := context.Background()
	var ids []string
	for i, repo := range []string{"acme/widgets", "acme/widgets", "acme/api", "acme/widgets", "acme/docs", "acme/api"} {
		kind := "github_issue"
		if i%2 == 1 {
			kind = "github_pull_request"
		}
		ids = append(ids, f.enqueue(kind, repo, 100+i))
	}
	for i, id := range ids {
		outcome := []string{"enqueued", "enqueued", "enqueued", "subject_collision", "enqueued", "enqueued"}[i]
		f.deliver(fmt.Sprintf("%08x-5e1f-11f0-8c3a-%012x", 0x72a1b000+i, i), []string{"issues", "pull_request"}[i%2], outcome, id)
	}
	f.deliver("72a1c100-5e1f-11f0-8c3a-000000000099", "issue_comment", "ignored", "")
	f.deliver("72a1c101-5e1f-11f0-8c3a-000000000100", "push", "ignored", "")
	if _, err := f.store.Lease(ctx, queue.LeaseParams{Max: 2, OwnerID: "gitlease-builtin-7f3a/1", WorkflowIDs: []string{"wf-a", "wf-b"}}); err != nil {
		t.Fatal(err)
	}
	for _, a := range []queue.ActParams{{EntryID: ids[3], Action: queue.ActionHold}, {EntryID: ids[4], Action: queue.ActionDrop}} {
		a.Actor = "dashboard admin session"
		if err := f.store.Act(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := f.q.UIOutboxOpen(ctx, f.pool, dbq.UIOutboxOpenParams{Lim: 100})
	if err != nil || len(rows) < 2 {
		t.Fatalf("outbox: %d rows, %v", len(rows), err)
	}
	if err := f.q.OutboxFail(ctx, f.pool, dbq.OutboxFailParams{ID: rows[0].ID, Now: f.clk.Now(),
		LastError:  new("POST https://api.github.com/repos/acme/widgets/check-runs: 422 Validation Failed [{Resource:CheckRun Field:head_sha Code:invalid}]"),
		LastAnswer: new("422 POST /repos/acme/widgets/check-runs: Validation Failed (head_sha invalid)")}); err != nil {
		t.Fatal(err)
	}
	if err := f.q.OutboxDone(ctx, f.pool, dbq.OutboxDoneParams{ID: rows[1].ID, Now: f.clk.Now(),
		LastAnswer: new("201 created check run 4242 on 0000000000000000000000000000000000000069 (queued)")}); err != nil {
		t.Fatal(err)
	}
	return ids[5]
}

// TestBrowser drives the dashboard in headless Chromium: it signs in
// through the form, opens every page, holds an item with its button, drops
// another through the confirmation, watches a list refresh itself and
// pauses it, and fails on any console error or uncaught exception (a
// Content-Security-Policy violation included). With GITLEASE_UI_SCREENSHOTS
// set to a directory (make screenshots) it writes each page's PNG there.
func TestBrowser(t *testing.T) {
	t.Parallel()
	path := chromium(t)
	f := newFixture(t, Config{AdminToken: adminToken, ViewToken: viewToken, Refresh: 400 * time.Millisecond})
	pending := seedDemo(t, f)
	shots := os.Getenv("GITLEASE_UI_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	ctx := startChromium(t, path)

	var mu sync.Mutex
	var problems []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()

	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	shot := func(name string) { screenshot(t, ctx, filepath.Join(shots, name+".png")) }
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	base := f.srv.URL

	step("open the login page", chromedp.Navigate(base+"/ui/items"), chromedp.WaitVisible(chromedp.CSS("#token")))
	shot("login")
	step("sign in", chromedp.SendKeys(chromedp.CSS("#token"), adminToken), chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#live.cards")))
	if h := text("h1"); h != "Overview" {
		t.Fatalf("after sign-in: %q", h)
	}
	shot("overview")

	step("items", chromedp.Navigate(base+"/ui/items"), chromedp.WaitVisible(chromedp.CSS("table.list")))
	shot("items")
	step("filter items", chromedp.Navigate(base+"/ui/items?repository=acme/api"), chromedp.WaitVisible(chromedp.CSS("table.list")))
	if body := text("#live"); strings.Contains(body, "acme/widgets") || !strings.Contains(body, "acme/api") {
		t.Errorf("filtered list: %q", body)
	}

	// Live refresh: a new item shows up without a reload; paused, the next does not.
	fresh := f.enqueue("github_issue", "acme/live", 1)
	step("live refresh", chromedp.Navigate(base+"/ui/items"), chromedp.WaitVisible(chromedp.CSS("#live-toggle")))
	f.clk.Advance(time.Second)
	later := f.enqueue("github_issue", "acme/live", 2)
	step("refreshed", chromedp.WaitVisible(chromedp.CSS(`a[href="/ui/items/`+later+`"]`)))
	step("pause", chromedp.Click(chromedp.CSS("#live-toggle")))
	if b := text("#live-toggle"); b != "Resume refresh" {
		t.Errorf("pause button reads %q", b)
	}
	paused := f.enqueue("github_issue", "acme/live", 3)
	step("paused", chromedp.Sleep(1500*time.Millisecond))
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('a[href="/ui/items/`+paused+`"]').length`)); err != nil || n != 0 {
		t.Errorf("a paused list refreshed: %d links, %v", n, err)
	}
	step("resume", chromedp.Click(chromedp.CSS("#live-toggle")))
	_ = fresh

	step("item", chromedp.Navigate(base+"/ui/items/"+pending), chromedp.WaitVisible(chromedp.CSS("section.actions")))
	shot("item")
	step("hold", chromedp.Click(chromedp.CSS(`form[action$="/hold"] button`)), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	if st := f.status(pending); st != queue.StatusHeld {
		t.Errorf("after clicking hold: %s", st)
	}
	if log := text("body"); !strings.Contains(log, "operator/hold") || !strings.Contains(log, "dashboard admin session") {
		t.Error("the item page shows no audit entry for the hold")
	}
	step("drop asks first", chromedp.Click(chromedp.CSS(`form[action$="/drop"] button`)), chromedp.WaitVisible(chromedp.CSS("#confirm-drop")))
	shot("confirm-drop")
	if st := f.status(pending); st != queue.StatusHeld {
		t.Errorf("drop without confirmation changed the item: %s", st)
	}
	step("drop", chromedp.Click(chromedp.CSS("#confirm-drop")), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	if st := f.status(pending); st != queue.StatusDropped {
		t.Errorf("after confirming drop: %s", st)
	}

	step("deliveries", chromedp.Navigate(base+"/ui/deliveries"), chromedp.WaitVisible(chromedp.CSS("table.list")))
	shot("deliveries")
	step("outbox", chromedp.Navigate(base+"/ui/outbox"), chromedp.WaitVisible(chromedp.CSS("table.list")))
	shot("outbox")
	step("retry", chromedp.Click(chromedp.CSS(`form[action$="/retry"] button`)), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.ob-failed').length`)); err != nil || n != 0 {
		t.Errorf("after retry: %d failed writes listed, %v", n, err)
	}
	step("not found", chromedp.Navigate(base+"/ui/items/"+uuid.NewString()), chromedp.WaitVisible(chromedp.CSS("p.error")))

	step("settle", chromedp.Sleep(200*time.Millisecond))
	mu.Lock()
	defer mu.Unlock()
	// The deliberate 404 above logs exactly one failed load (which also
	// shows the listener hears the console); nothing else may be logged.
	if len(problems) != 1 || !strings.Contains(problems[0], "404") {
		t.Errorf("console errors and exceptions, want only the one 404:\n%s", strings.Join(problems, "\n"))
	}
}
