package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitlease/gitlease/webhook"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	github "github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
)

const (
	installation = 4242
	repoID       = 1296269
	repoName     = "octo/widgets"
)

// harness is one gitlease instance's GitHub side: a queue whose Observer is
// the outbox, and a sender draining it into the fake GitHub.
type harness struct {
	gh     *githubtest.Server
	pool   *pgxpool.Pool
	store  *queue.Store
	outbox *outbox.Outbox
}

func newHarness(t *testing.T, opts ...githubtest.Option) *harness {
	t.Helper()
	gh := githubtest.New(t, append([]githubtest.Option{githubtest.ForbidRefUpdates()}, opts...)...)
	gh.AddRepo("octo", "widgets", repoID, "main", true)
	gh.AddInstallation(installation, repoName)
	h := &harness{gh: gh, pool: dbtest.New(t), outbox: outbox.NewOutbox(nil, nil)}
	h.store = queue.NewStore(h.pool, queue.Config{Observer: h.outbox, Views: outbox.NewItems(h.pool)})
	return h
}

func (h *harness) sender(t *testing.T) *outbox.Sender {
	t.Helper()
	inst, err := github.NewInstallations(github.Config{AppID: h.gh.AppID, PrivateKey: h.gh.PrivateKeyPEM, APIURL: h.gh.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return outbox.NewSender(h.pool, inst, outbox.SenderConfig{MaxBackoff: 20 * time.Millisecond, Poll: 10 * time.Millisecond}, nil)
}

// drain runs senders until the outbox has nothing pending.
func (h *harness) drain(t *testing.T, senders ...*outbox.Sender) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var wg sync.WaitGroup
		for _, s := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.RunOnce(ctx); err != nil {
					t.Errorf("sender round: %v", err)
				}
			}()
		}
		wg.Wait()
		var pending, failed int
		if err := h.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'failed') FROM outbox`).Scan(&pending, &failed); err != nil {
			t.Fatal(err)
		}
		if failed > 0 {
			var errText string
			_ = h.pool.QueryRow(ctx, `SELECT last_error FROM outbox WHERE status = 'failed' LIMIT 1`).Scan(&errText)
			t.Fatalf("%d outbox rows failed permanently, e.g. %s", failed, errText)
		}
		if pending == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("outbox did not drain within 60s")
}

func issueParams(n int) queue.EnqueueParams {
	meta, _ := json.Marshal(map[string]any{
		"installation_id": installation, "repository_id": repoID, "repository": repoName, "number": n,
		"html_url": fmt.Sprintf("https://github.com/%s/issues/%d", repoName, n),
	})
	return queue.EnqueueParams{
		Dispatch: queue.SubjectDispatch{
			Subject:     &queue.SubjectRef{Kind: webhook.KindIssue, ID: fmt.Sprintf("%d#%d", repoID, n), Title: fmt.Sprintf("Fix thing %d", n), Metadata: meta},
			WorkflowRef: "coding", TriggerSource: "github:issues.opened", RequestedAt: queue.Timestamp{Time: time.Now()},
		},
		IdempotencyKey: fmt.Sprintf("delivery-%d", n),
		Reservation:    &queue.Reservation{Repository: repoName, BaseRef: "refs/heads/main", HeadRef: fmt.Sprintf("refs/heads/gitlease/issue-%d", n)},
		FromGitHub:     true, // as the webhook intake enqueues it
	}
}

func (h *harness) leaseAll(t *testing.T, owner string) []queue.FencedEntry {
	t.Helper()
	var all []queue.FencedEntry
	for {
		res, err := h.store.Lease(context.Background(), queue.LeaseParams{Max: 5, OwnerID: owner,
			WorkflowIDs: []string{owner + "-a" + fmt.Sprint(len(all)), owner + "-b" + fmt.Sprint(len(all)), owner + "-c" + fmt.Sprint(len(all)), owner + "-d" + fmt.Sprint(len(all)), owner + "-e" + fmt.Sprint(len(all))}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Leased) == 0 {
			return all
		}
		all = append(all, res.Leased...)
	}
}

func (h *harness) complete(t *testing.T, fe queue.FencedEntry, status string) {
	t.Helper()
	res, err := h.store.Complete(context.Background(), queue.CompleteParams{Execution: fe.Execution, Status: status, Note: "all good"})
	if err != nil || res.Outcome != queue.OutcomeApplied {
		t.Fatalf("complete: %+v %v", res, err)
	}
}

// assertProvisioned checks issue n's branch, commit, draft PR and check run.
func (h *harness) assertProvisioned(t *testing.T, n int, status, conclusion string) {
	t.Helper()
	branch := fmt.Sprintf("gitlease/issue-%d", n)
	sha, ok := h.gh.Branch(repoName, branch)
	if !ok {
		t.Fatalf("branch %s was not created", branch)
	}
	c, _ := h.gh.Commit(repoName, sha)
	base, _ := h.gh.Branch(repoName, "main")
	if len(c.Parents) != 1 || c.Parents[0] != base || !strings.Contains(c.Message, fmt.Sprintf("#%d", n)) {
		t.Fatalf("branch head %+v is not one empty commit on main", c)
	}
	if pc, _ := h.gh.Commit(repoName, base); c.Tree != pc.Tree {
		t.Fatalf("initial commit changes the tree")
	}
	var prs []githubtest.PullRequest
	for _, pr := range h.gh.PullRequests(repoName) {
		if pr.Head == branch {
			prs = append(prs, pr)
		}
	}
	if len(prs) != 1 || !prs[0].Draft || prs[0].Base != "main" || !strings.Contains(prs[0].Body, fmt.Sprintf("Closes #%d", n)) ||
		!strings.Contains(prs[0].Body, `<!-- gitlease {"entry_id":`) || prs[0].Title != fmt.Sprintf("Fix thing %d", n) {
		t.Fatalf("pull requests from %s: %+v, want one draft closing #%d with the marker", branch, prs, n)
	}
	var runs []githubtest.CheckRun
	for _, cr := range h.gh.CheckRuns(repoName) {
		if cr.HeadSHA == sha {
			runs = append(runs, cr)
		}
	}
	if len(runs) != 1 || runs[0].Name != "gitlease" || runs[0].Status != status || runs[0].Conclusion != conclusion {
		t.Fatalf("check runs on %s: %+v, want one %s/%s", sha, runs, status, conclusion)
	}
}

func TestIssueLeaseProvisionsBranchPullRequestAndCheckRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	res, err := h.store.Enqueue(ctx, issueParams(42))
	if err != nil {
		t.Fatal(err)
	}
	h.drain(t, h.sender(t)) // nothing to write before the lease: no branch, no check run
	if n := h.gh.Count(githubtest.AnyKind); n != 0 {
		t.Fatalf("%d GitHub calls before the lease, want 0", n)
	}
	fe := h.leaseAll(t, "w1")[0]
	h.drain(t, h.sender(t))
	h.assertProvisioned(t, 42, "in_progress", "")
	it, err := h.store.Get(ctx, res.EntryID)
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.store.View(context.Background(), it.EntryID())
	if err != nil {
		t.Fatal(err)
	}
	p := v.Provisioning
	if p == nil || p.Branch != "gitlease/issue-42" || p.PullRequestNumber == 0 || p.HeadSHA == "" || v.CheckRunID == 0 {
		t.Fatalf("item records %+v, check run %d", p, v.CheckRunID)
	}
	h.complete(t, fe, queue.StatusCompleted)
	h.drain(t, h.sender(t))
	h.assertProvisioned(t, 42, "completed", "success")
	if cr, _ := h.gh.CheckRun(v.CheckRunID); !strings.Contains(cr.Summary, "all good") {
		t.Fatalf("check run summary %q does not carry the worker's note", cr.Summary)
	}
}

func TestGitHubFailuresChangeNothingButTime(t *testing.T) {
	t.Parallel()
	for name, fault := range map[string]func(gh *githubtest.Server){
		"first 3 calls of every kind fail": func(gh *githubtest.Server) { gh.FailEach(3, 502) },
		"responses lost after the write": func(gh *githubtest.Server) {
			for _, k := range []githubtest.Kind{githubtest.KindCreateRef, githubtest.KindCreateCommit, githubtest.KindCreatePull, githubtest.KindCreateCheckRun, githubtest.KindUpdateCheckRun} {
				gh.LoseResponses(k, 1)
			}
		},
		// Without Retry-After the wait is a minute (limits_test.go covers it).
		"secondary rate limit": func(gh *githubtest.Server) { gh.SecondaryRateLimit(githubtest.AnyKind, 2, 1) },
		"primary rate limit":   func(gh *githubtest.Server) { gh.PrimaryRateLimit(2, time.Second) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			fault(h.gh)
			if _, err := h.store.Enqueue(context.Background(), issueParams(7)); err != nil {
				t.Fatal(err)
			}
			fe := h.leaseAll(t, "w1")[0]
			h.drain(t, h.sender(t))
			h.complete(t, fe, queue.StatusFailed)
			h.drain(t, h.sender(t))
			h.assertProvisioned(t, 7, "completed", "failure")
		})
	}
}

func TestDraftsUnsupportedFallsBackToAReadyPullRequest(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	gh.AddRepo("octo", "widgets", repoID, "main", false)
	gh.AddInstallation(installation, repoName)
	h := &harness{gh: gh, pool: dbtest.New(t), outbox: outbox.NewOutbox(nil, nil)}
	h.store = queue.NewStore(h.pool, queue.Config{Observer: h.outbox, Views: outbox.NewItems(h.pool)})
	if _, err := h.store.Enqueue(context.Background(), issueParams(3)); err != nil {
		t.Fatal(err)
	}
	h.leaseAll(t, "w1")
	h.drain(t, h.sender(t))
	prs := gh.PullRequests(repoName)
	if len(prs) != 1 || prs[0].Draft {
		t.Fatalf("pull requests %+v, want one ready pull request", prs)
	}
}

func TestAnnotationsWaitForTheCheckRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	res, err := h.store.Enqueue(ctx, issueParams(5))
	if err != nil {
		t.Fatal(err)
	}
	// 60 replays before the item has a check run: their notices are kept,
	// then written in requests of at most 50 once the branch exists.
	err = h.store.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		for i := range 60 {
			r := webhook.Result{Event: "issues", Response: webhook.Response{DeliveryID: fmt.Sprintf("d-%d", i), Outcome: webhook.OutcomeReplay, EntryID: res.EntryID}}
			if err := h.outbox.DeliveryFeedback(ctx, tx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := h.sender(t).RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("sender claimed %d rows (%v) for an item without a commit, want 0", n, err)
	}
	if n := h.gh.Count(githubtest.AnyKind); n != 0 {
		t.Fatalf("%d GitHub calls before the item has a commit, want 0", n)
	}
	h.leaseAll(t, "w1")
	h.drain(t, h.sender(t))
	runs := h.gh.CheckRuns(repoName)
	if len(runs) != 1 || len(runs[0].Annotations) != 60 {
		t.Fatalf("check runs %d, annotations %d; want 1 with 60", len(runs), len(runs[0].Annotations))
	}
	a := runs[0].Annotations[0]
	if a.Path != ".github" || a.StartLine != 1 || a.Level != "notice" || !strings.Contains(a.RawDetails, `"delivery_id":"d-0"`) {
		t.Fatalf("annotation %+v", a)
	}
}

// TestSendersShareOneOutbox: two senders (two serve processes) drain the
// writes of 100 leased issues: 100 branches, 100 pull requests, 100 check
// runs, none doubled.
func TestSendersShareOneOutbox(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.gh.ReserveNumbers(repoName, 200)
	for n := 1; n <= 100; n++ {
		if _, err := h.store.Enqueue(context.Background(), issueParams(n)); err != nil {
			t.Fatal(err)
		}
	}
	leased := h.leaseAll(t, "w1")
	if len(leased) != 100 {
		t.Fatalf("leased %d", len(leased))
	}
	h.drain(t, h.sender(t), h.sender(t))
	for _, fe := range leased {
		h.complete(t, fe, queue.StatusCompleted)
	}
	h.drain(t, h.sender(t), h.sender(t))
	if b := len(h.gh.Branches(repoName)); b != 101 {
		t.Fatalf("%d branches, want 100 + main", b)
	}
	if p := len(h.gh.PullRequests(repoName)); p != 100 {
		t.Fatalf("%d pull requests, want 100", p)
	}
	runs := h.gh.CheckRuns(repoName)
	if len(runs) != 100 {
		t.Fatalf("%d check runs, want 100", len(runs))
	}
	for _, r := range runs {
		if r.Conclusion != "success" {
			t.Fatalf("check run %d concluded %q", r.ID, r.Conclusion)
		}
	}
}

// TestGroupOfItemsCheckRuns: items enqueued as a group (the webhook
// intake's group commit) get the check runs items enqueued one by one get:
// a queued one on each pull request's head commit, none for an issue yet.
func TestGroupOfItemsCheckRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	shas := map[int]string{1: h.gh.Push(repoName, "feature-1", "one"), 3: h.gh.Push(repoName, "feature-3", "three")}
	ps := []queue.EnqueueParams{pullRequestParams(1, shas[1]), issueParams(2), pullRequestParams(3, shas[3])}
	ps[0].IdempotencyKey, ps[2].IdempotencyKey = "delivery-pr-1", "delivery-pr-3"
	var answers []queue.GroupAnswer
	err := h.store.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		answers, err = h.store.EnqueueGroupTx(ctx, tx, ps)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range answers {
		if a.Err != nil || !a.Result.Enqueued {
			t.Fatalf("request %d: %+v", i, a)
		}
	}
	h.drain(t, h.sender(t))
	runs := h.gh.CheckRuns(repoName)
	if len(runs) != 2 {
		t.Fatalf("check runs: %+v, want one for each pull request", runs)
	}
	for _, r := range runs {
		n := map[string]int{answers[0].Result.EntryID: 1, answers[2].Result.EntryID: 3}[r.ExternalID]
		if n == 0 || r.HeadSHA != shas[n] || r.Status != "queued" || r.Name != "gitlease" {
			t.Errorf("check run %+v, want gitlease queued on pull request 1's or 3's head", r)
		}
	}
}

// TestPullRequestItemCheckRun: a pull-request item's check run is created
// queued on the head commit at enqueue, then follows the item.
func TestPullRequestItemCheckRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	sha := h.gh.Push(repoName, "feature", "a change")
	meta, _ := json.Marshal(map[string]any{"installation_id": installation, "repository_id": repoID, "repository": repoName,
		"number": 57, "html_url": "https://github.com/" + repoName + "/pull/57", "head_sha": sha})
	res, err := h.store.Enqueue(ctx, queue.EnqueueParams{
		Dispatch: queue.SubjectDispatch{Subject: &queue.SubjectRef{Kind: webhook.KindPullRequest, ID: fmt.Sprintf("%d#57", repoID), Metadata: meta},
			WorkflowRef: "coding", TriggerSource: "github:pull_request.opened", RequestedAt: queue.Timestamp{Time: time.Now()}},
		Reservation: &queue.Reservation{Repository: repoName, BaseRef: "refs/heads/main", HeadRef: "refs/heads/feature"},
		FromGitHub:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(t, h.sender(t))
	runs := h.gh.CheckRuns(repoName)
	if len(runs) != 1 || runs[0].HeadSHA != sha || runs[0].Status != "queued" || runs[0].ExternalID != res.EntryID {
		t.Fatalf("check runs at enqueue: %+v, want one queued on %s", runs, sha)
	}
	fe := h.leaseAll(t, "w1")[0]
	h.drain(t, h.sender(t))
	if cr, _ := h.gh.CheckRun(runs[0].ID); cr.Status != "in_progress" {
		t.Fatalf("check run after lease: %s", cr.Status)
	}
	h.complete(t, fe, queue.StatusCompleted)
	h.drain(t, h.sender(t))
	if cr, _ := h.gh.CheckRun(runs[0].ID); cr.Status != "completed" || cr.Conclusion != "success" {
		t.Fatalf("check run after completion: %s/%s", cr.Status, cr.Conclusion)
	}
	if n := len(h.gh.Branches(repoName)); n != 2 || len(h.gh.PullRequests(repoName)) != 0 {
		t.Fatalf("a pull-request item provisioned something: %d branches", n)
	}
}
