package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

// TestDevGitHubRecordsTheOutboxWrites drives the real outbox sender against
// dev's dry-run GitHub for an issue item on a base branch nobody set up:
// once leased, the item gets its branch, commit, draft pull request and
// check run (with annotations kept for it before), provisioning is
// recorded, the fake holds what was written, and each write is one
// "dry-run GitHub call" log line saying what would have been sent.
func TestDevGitHubRecordsTheOutboxWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var calls atomic.Int64 // the sender may send rows of other lanes at once
	counted := func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) { calls.Add(1); return next.RoundTrip(r) })
	}
	inst, fake, err := newDevGitHub(config{BranchPrefix: "gitlease/"}, counted, logger)
	if err != nil {
		t.Fatal(err)
	}
	pool := dbtest.New(t)
	box := outbox.NewOutbox(nil, nil)
	store := queue.NewStore(pool, queue.Config{Observer: box, Views: outbox.NewItems(pool)})
	sender := outbox.NewSender(pool, inst, outbox.SenderConfig{MaxBackoff: 20 * time.Millisecond, Poll: 10 * time.Millisecond}, nil)
	drain := func() {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if _, err := sender.RunOnce(ctx); err != nil {
				t.Fatalf("sender round: %v", err)
			}
			var pending, failed int
			var lastErr *string
			if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'failed'), max(last_error) FROM outbox`).Scan(&pending, &failed, &lastErr); err != nil {
				t.Fatal(err)
			}
			switch {
			case failed > 0:
				t.Fatalf("%d outbox rows failed, e.g. %v", failed, *lastErr)
			case pending == 0:
				return
			case time.Now().After(deadline):
				t.Fatal("outbox did not drain within 30s")
			}
		}
	}

	const repo, n = "octo/widgets", 42
	meta, _ := json.Marshal(map[string]any{"installation_id": 4242, "repository_id": 1296269, "repository": repo, "number": n})
	res, err := store.Enqueue(ctx, queue.EnqueueParams{
		Dispatch: queue.SubjectDispatch{
			Subject:     &queue.SubjectRef{Kind: "github_issue", ID: fmt.Sprintf("1296269#%d", n), Title: "Fix thing 42", Metadata: meta},
			WorkflowRef: "coding", TriggerSource: "github:issues.opened", RequestedAt: queue.Timestamp{Time: time.Now()},
		},
		IdempotencyKey: "delivery-42",
		Reservation:    &queue.Reservation{Repository: repo, BaseRef: "refs/heads/develop", HeadRef: "refs/heads/gitlease/issue-42"},
		FromGitHub:     true, // as the webhook intake enqueues
	})
	if err != nil {
		t.Fatal(err)
	}
	// Two replays' notices, kept until the check run exists: the first is
	// written with its creation, the second in an update of its own.
	if err := store.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		for i := range 2 {
			r := webhook.Result{Event: "issues", Response: webhook.Response{DeliveryID: fmt.Sprintf("replay-%d", i), Outcome: webhook.OutcomeReplay, EntryID: res.EntryID}}
			if err := box.DeliveryFeedback(ctx, tx, r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	leased, err := store.Lease(ctx, queue.LeaseParams{Max: 1, OwnerID: "w1", WorkflowIDs: []string{"w1-a"}})
	if err != nil || len(leased.Leased) != 1 {
		t.Fatalf("lease: %+v, %v", leased, err)
	}
	drain()
	if done, err := store.Complete(ctx, queue.CompleteParams{Execution: leased.Leased[0].Execution, Status: queue.StatusCompleted, Note: "all good"}); err != nil || done.Outcome != queue.OutcomeApplied {
		t.Fatalf("complete: %+v, %v", done, err)
	}
	drain()

	v, err := store.View(ctx, res.EntryID)
	if err != nil {
		t.Fatal(err)
	}
	p, runID := v.Provisioning, v.CheckRunID
	if p == nil || p.Branch != "gitlease/issue-42" || p.PullRequestNumber != 1 || p.HeadSHA == "" ||
		!strings.HasPrefix(p.PullRequestURL, devHTMLURL+"/") || runID == 0 {
		t.Fatalf("item records provisioning %+v, check run %d; want branch gitlease/issue-42, pull request 1 at %s, a check run", p, runID, devHTMLURL)
	}
	develop, ok := fake.Branch(repo, "develop")
	if !ok {
		t.Fatal("the fake has no base branch develop")
	}
	if prs := fake.PullRequests(repo); len(prs) != 1 || !prs[0].Draft || prs[0].Base != "develop" || prs[0].HeadSHA != p.HeadSHA {
		t.Errorf("the fake holds pull requests %+v", prs)
	}
	if runs := fake.CheckRuns(repo); len(runs) != 1 || runs[0].Conclusion != "success" || len(runs[0].Annotations) != 2 {
		t.Errorf("the fake holds check runs %+v", runs)
	}
	if v := fake.Violations(); len(v) > 0 {
		t.Errorf("the sender sent what GitHub rejects: %+v", v)
	}
	if got := len(fake.Requests()); calls.Load() != int64(got) {
		t.Errorf("%d calls passed serve's transport, the fake answered %d", calls.Load(), got)
	}

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if r["msg"] == "dry-run GitHub call" {
			lines = append(lines, r)
		}
		if r["level"] == "WARN" || r["level"] == "ERROR" {
			t.Errorf("logged %v", r)
		}
	}
	path := "/repos/" + repo
	runPath := fmt.Sprintf("%s/check-runs/%d", path, runID)
	for _, want := range []map[string]any{
		{"method": "POST", "path": path + "/git/commits", "http_status": 201.0, "parents": develop, "sha": p.HeadSHA},
		{"method": "POST", "path": path + "/git/refs", "http_status": 201.0, "ref": "refs/heads/gitlease/issue-42", "sha": p.HeadSHA},
		{"method": "POST", "path": path + "/pulls", "http_status": 201.0, "title": "Fix thing 42", "head": "gitlease/issue-42", "base": "develop", "draft": true, "number": 1.0},
		// The notices kept for the item go out with its check run's creation
		// (queued) and after it, each feedback row its own request; the
		// lease's update follows them.
		{"method": "POST", "path": path + "/check-runs", "http_status": 201.0, "name": "gitlease", "head_sha": p.HeadSHA, "status": "queued", "annotations": 1.0, "check_run_id": float64(runID)},
		{"method": "PATCH", "path": runPath, "http_status": 200.0, "annotations": 1.0, "check_run_id": float64(runID)},
		{"method": "PATCH", "path": runPath, "http_status": 200.0, "status": "in_progress", "title": "In progress: generation 1"},
		{"method": "PATCH", "path": runPath, "http_status": 200.0, "status": "completed", "conclusion": "success", "title": "Completed: generation 1"},
	} {
		if got := countRecords(lines, want); got != 1 {
			t.Errorf("%d dry-run call lines with %v, want 1", got, want)
		}
	}
	if len(lines) != 7 {
		t.Errorf("%d dry-run call lines, want 7 (commit, ref, pull request, check run, annotations, in progress, conclusion):\n%v", len(lines), lines)
	}
}

// TestDevGitHubBaseBranches checks which branches dev's fake creates when
// a call names them: every one but gitlease's own issue head branches.
func TestDevGitHubBaseBranches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prefix, branch string
		exists         bool
	}{
		{"gitlease/", "main", true},
		{"gitlease/", "release/1.x", true},
		{"gitlease/", "gitlease/issue-7", false},
		{"gitlease/", "gitlease/issue-7-notes", true},
		{"gitlease/", "issue-7", true},
		{"", "issue-7", false},
		{"", "gitlease/issue-7", true},
	} {
		if got := notIssueBranch(tc.prefix)(tc.branch); got != tc.exists {
			t.Errorf("prefix %q: branch %q exists before gitlease: %v, want %v", tc.prefix, tc.branch, got, tc.exists)
		}
	}
}

// roundTripFunc is a function as an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countRecords counts the records that carry every field of want, with
// JSON's types (numbers are float64).
func countRecords(records []map[string]any, want map[string]any) int {
	n := 0
	for _, r := range records {
		if hasRecord([]map[string]any{r}, want) {
			n++
		}
	}
	return n
}
