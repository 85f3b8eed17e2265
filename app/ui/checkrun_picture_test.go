package ui

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/queue"
)

// TestCheckRunPicture: an issue item leased and completed with its
// command's output, its GitHub writes sent by the real outbox sender to
// the fake GitHub as GitHub Enterprise Server (so the check run's html_url
// is a page the fake serves), and that page opened in chromium: the check
// run as a developer sees it, in the fake's rendering. With
// GITLEASE_UI_SCREENSHOTS (make screenshots) it is written as
// check-run.png, the README's picture.
func TestCheckRunPicture(t *testing.T) {
	t.Parallel()
	path := chromium(t)
	gh := githubtest.New(t, githubtest.Enterprise())
	gh.AddRepo("acme", "widgets", 1296269, "main", true)
	gh.AddInstallation(7, "acme/widgets")
	f := newFixture(t, adminConfig())
	ctx := context.Background()
	// An issue item as the webhook intake enqueues it.
	enq, err := f.store.Enqueue(ctx, queue.EnqueueParams{
		Dispatch: queue.SubjectDispatch{
			Subject: &queue.SubjectRef{Kind: "github_issue", ID: "1296269#42", Title: "Greet in the user's language",
				Metadata: json.RawMessage(`{"installation_id":7,"repository_id":1296269,"repository":"acme/widgets","number":42,` +
					`"html_url":"` + gh.WebURL() + `acme/widgets/issues/42"}`)},
			WorkflowRef: "coding", TriggerSource: "github", RequestedAt: queue.Timestamp{Time: f.clk.Now()},
		},
		Reservation: &queue.Reservation{Repository: "acme/widgets", BaseRef: "refs/heads/main", HeadRef: "refs/heads/gitlease/issue-42"},
		FromGitHub:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	entry := enq.EntryID

	installations, err := github.NewInstallations(github.Config{AppID: gh.AppID, PrivateKey: gh.PrivateKeyPEM, APIURL: gh.URL()})
	if err != nil {
		t.Fatal(err)
	}
	sender := outbox.NewSender(f.pool, installations, outbox.SenderConfig{PublicURL: "https://gitlease.example.com"}, nil)
	drain := func() {
		t.Helper()
		if !gh.Wait(30*time.Second, func() bool {
			n, err := sender.RunOnce(ctx)
			return err == nil && n == 0 && f.pendingOutbox() == 0
		}) {
			rows, _ := f.pool.Query(ctx, `SELECT kind, status, coalesce(last_error, ''), attempts FROM outbox`)
			for rows.Next() {
				var k, st, e string
				var a int32
				_ = rows.Scan(&k, &st, &e, &a)
				t.Logf("outbox %s %s %d: %s", k, st, a, e)
			}
			rows.Close()
			t.Fatal("the outbox did not drain")
		}
	}
	leased, err := f.store.Lease(ctx, queue.LeaseParams{Max: 1, OwnerID: "gitlease-builtin-7f3a/1", WorkflowIDs: []string{"wf-1"}})
	if err != nil || len(leased.Leased) != 1 {
		t.Fatalf("lease: %+v %v", leased, err)
	}
	drain() // the branch, the draft pull request, the check run in progress
	output := "$ go test ./...\nok  \tgithub.com/acme/widgets/greet\t0.012s\nok  \tgithub.com/acme/widgets/cmd/widgets\t0.030s\n" +
		"$ git push origin gitlease/issue-42\nbranch 'gitlease/issue-42' set up to track 'origin/gitlease/issue-42'."
	if _, err := f.store.Complete(ctx, queue.CompleteParams{Execution: leased.Leased[0].Execution, Status: queue.StatusCompleted, Note: output}); err != nil {
		t.Fatal(err)
	}
	drain()

	runs := gh.CheckRuns("acme/widgets")
	if len(runs) != 1 || runs[0].Conclusion != "success" || !strings.HasSuffix(runs[0].DetailsURL, "/ui/items/"+entry) {
		t.Fatalf("check runs: %+v", runs)
	}
	browser := startChromium(t, path)
	if err := chromedp.Do(browser, chromedp.Navigate(runs[0].HTMLURL), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
		t.Fatal(err)
	}
	body, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gitlease", "Completed: generation 1", "ok  \tgithub.com/acme/widgets/greet"} {
		if !strings.Contains(body, strings.ReplaceAll(want, "\t", "")) && !strings.Contains(body, want) {
			t.Errorf("the check run page lacks %q:\n%s", want, body)
		}
	}
	dir := os.Getenv("GITLEASE_UI_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	screenshot(t, browser, filepath.Join(dir, "check-run.png"))
}
