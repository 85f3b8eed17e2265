package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-github/v66/github"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/app"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
)

// logBuffer collects JSON log records, safe for concurrent writers.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the logged records with the given message.
func (b *logBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// find returns the records that carry every field of want (compared as
// their JSON rendering, so numbers and booleans can be given as Go values).
func find(records []map[string]any, want map[string]any) []map[string]any {
	var out []map[string]any
next:
	for _, r := range records {
		for k, v := range want {
			got, _ := json.Marshal(r[k])
			exp, _ := json.Marshal(v)
			if !bytes.Equal(got, exp) {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}

// newDryRun returns a recorder logging to a buffer, and installations
// configured to use it.
func newDryRun(t *testing.T) (*app.Installations, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	dr := app.NewDryRun(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	cfg, err := dr.GitHubConfig()
	if err != nil {
		t.Fatal(err)
	}
	inst, err := app.NewInstallations(cfg)
	if err != nil {
		t.Fatalf("NewInstallations(dry-run config): %v", err)
	}
	return inst, logs
}

// TestDryRunRecordsTheOutboxWrites drives the real outbox sender against
// the dry-run recorder for an issue item: once leased, the item gets its
// branch, commit, draft pull request and check run (with annotations kept
// for it before), provisioning is recorded, and each write is one
// "dry-run GitHub call" log line saying what would have been sent.
func TestDryRunRecordsTheOutboxWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inst, logs := newDryRun(t)
	h := &harness{pool: dbtest.New(t), outbox: app.NewOutbox(nil, nil)}
	h.store = queue.NewStore(h.pool, queue.Config{Observer: h.outbox})
	sender := app.NewSender(h.pool, inst, app.SenderConfig{}, nil)

	res, err := h.store.Enqueue(ctx, issueParams(42))
	if err != nil {
		t.Fatal(err)
	}
	it, err := h.store.Get(ctx, res.EntryID)
	if err != nil {
		t.Fatal(err)
	}
	// 60 annotations: written as 50 with the creation and 10 in an update.
	anns := make([]app.Annotation, 60)
	for i := range anns {
		anns[i] = app.Annotation{Level: "notice", Title: "Replayed delivery", Message: fmt.Sprintf("replay %d", i)}
	}
	if err := h.store.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error { return h.outbox.Annotate(ctx, tx, it, anns...) }); err != nil {
		t.Fatal(err)
	}
	fe := h.leaseAll(t, "w1")[0]
	h.drain(t, sender)

	it, err = h.store.Get(ctx, res.EntryID)
	if err != nil {
		t.Fatal(err)
	}
	p := it.Provisioning()
	if p == nil || p.Branch != "gitlease/issue-42" || p.PullRequestNumber != 1 || p.HeadSHA == "" ||
		!strings.HasPrefix(p.PullRequestURL, "https://dry-run.invalid/") || it.CheckRunID() == 0 {
		t.Fatalf("item records provisioning %+v, check run %d; want branch gitlease/issue-42, pull request 1 at dry-run.invalid, a check run", p, it.CheckRunID())
	}

	h.complete(t, fe, queue.StatusCompleted)
	h.drain(t, sender)

	// The initial commit's parent is main's head, as the recorder answers it.
	c, err := inst.Client(installation)
	if err != nil {
		t.Fatal(err)
	}
	main, _, err := c.Git.GetRef(ctx, "octo", "widgets", "heads/main")
	if err != nil {
		t.Fatal(err)
	}

	calls := logs.records(t, "dry-run GitHub call")
	const repo = "/repos/octo/widgets"
	for _, want := range []map[string]any{
		{"method": "POST", "path": repo + "/git/commits", "http_status": 201, "parents": main.GetObject().GetSHA(), "sha": p.HeadSHA},
		{"method": "POST", "path": repo + "/git/refs", "http_status": 201, "ref": "refs/heads/gitlease/issue-42", "sha": p.HeadSHA},
		{"method": "POST", "path": repo + "/pulls", "http_status": 201, "title": "Fix thing 42", "head": "gitlease/issue-42", "base": "main", "draft": true, "number": 1},
		// The annotations kept for the item create its check run (queued), in
		// requests of at most 50; the lease's update follows them.
		{"method": "POST", "path": repo + "/check-runs", "http_status": 201, "name": "gitlease", "head_sha": p.HeadSHA, "status": "queued", "annotations": 50, "check_run_id": it.CheckRunID()},
		{"method": "PATCH", "path": fmt.Sprintf("%s/check-runs/%d", repo, it.CheckRunID()), "http_status": 200, "annotations": 10},
		{"method": "PATCH", "path": fmt.Sprintf("%s/check-runs/%d", repo, it.CheckRunID()), "http_status": 200, "status": "in_progress", "title": "In progress: generation 1"},
		{"method": "PATCH", "path": fmt.Sprintf("%s/check-runs/%d", repo, it.CheckRunID()), "http_status": 200, "status": "completed", "conclusion": "success", "title": "Completed: generation 1"},
	} {
		if got := find(calls, want); len(got) != 1 {
			t.Errorf("%d dry-run call lines with %v, want 1; all calls:\n%v", len(got), want, calls)
		}
	}
	if len(calls) != 7 {
		t.Errorf("%d dry-run write lines, want 7 (commit, ref, pull request, check run, annotations, in progress, conclusion):\n%v", len(calls), calls)
	}
	if w := logs.records(t, "dry-run GitHub recorder does not know this endpoint; answered 404"); len(w) > 0 {
		t.Errorf("the sender called endpoints the recorder does not know: %v", w)
	}
}

func status(err error) int {
	var r *github.ErrorResponse
	if errors.As(err, &r) && r.Response != nil {
		return r.Response.StatusCode
	}
	return 0
}

// TestDryRunAnswersLikeGitHub checks the recorder's answers through
// go-github: what the sender relies on (404s, 422s, remembered objects,
// increasing numbers, pagination) behaves as on GitHub.
func TestDryRunAnswersLikeGitHub(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inst, logs := newDryRun(t)

	if tok, err := inst.Token(ctx, 7); err != nil || tok != "dry-run-token-installation-7" {
		t.Fatalf("Token = %q, %v", tok, err)
	}
	if bot, err := inst.BotLogin(ctx); err != nil || bot != app.DryRunSlug+"[bot]" {
		t.Fatalf("BotLogin = %q, %v", bot, err)
	}
	c, err := inst.Client(7)
	if err != nil {
		t.Fatal(err)
	}

	if _, _, err := c.Git.GetRef(ctx, "o", "r", "heads/gitlease/issue-1"); status(err) != http.StatusNotFound {
		t.Fatalf("GetRef of an issue branch never created: %v, want 404", err)
	}
	base, _, err := c.Git.GetRef(ctx, "o", "r", "heads/develop")
	if err != nil {
		t.Fatalf("GetRef of a base branch: %v", err)
	}
	again, _, _ := c.Git.GetRef(ctx, "o", "r", "heads/develop")
	if base.GetObject().GetSHA() == "" || again.GetObject().GetSHA() != base.GetObject().GetSHA() {
		t.Fatalf("base branch resolves to %q then %q", base.GetObject().GetSHA(), again.GetObject().GetSHA())
	}
	baseCommit, _, err := c.Git.GetCommit(ctx, "o", "r", base.GetObject().GetSHA())
	if err != nil || baseCommit.GetTree().GetSHA() == "" {
		t.Fatalf("GetCommit of the base: %+v, %v", baseCommit, err)
	}
	if _, _, err := c.Git.GetCommit(ctx, "o", "r", strings.Repeat("0", 40)); status(err) != http.StatusNotFound {
		t.Fatalf("GetCommit of an unknown SHA: %v, want 404", err)
	}

	branch := func(n int) string {
		t.Helper()
		commit, _, err := c.Git.CreateCommit(ctx, "o", "r", &github.Commit{
			Message: github.String(fmt.Sprintf("start #%d", n)), Tree: &github.Tree{SHA: baseCommit.GetTree().SHA},
			Parents: []*github.Commit{{SHA: base.GetObject().SHA}},
		}, nil)
		if err != nil {
			t.Fatalf("CreateCommit: %v", err)
		}
		if got, _, err := c.Git.GetCommit(ctx, "o", "r", commit.GetSHA()); err != nil || got.Parents[0].GetSHA() != base.GetObject().GetSHA() {
			t.Fatalf("created commit reads back as %+v, %v", got, err)
		}
		name := fmt.Sprintf("gitlease/issue-%d", n)
		ref := &github.Reference{Ref: github.String("refs/heads/" + name), Object: &github.GitObject{SHA: commit.SHA}}
		if _, _, err := c.Git.CreateRef(ctx, "o", "r", ref); err != nil {
			t.Fatalf("CreateRef: %v", err)
		}
		var ger *github.ErrorResponse
		if _, _, err := c.Git.CreateRef(ctx, "o", "r", ref); !errors.As(err, &ger) || ger.Response.StatusCode != 422 || ger.Message != "Reference already exists" {
			t.Fatalf("second CreateRef: %v, want 422 Reference already exists", err)
		}
		if got, _, err := c.Git.GetRef(ctx, "o", "r", "heads/"+name); err != nil || got.GetObject().GetSHA() != commit.GetSHA() {
			t.Fatalf("GetRef of the created branch: %+v, %v", got, err)
		}
		return name
	}
	if _, _, err := c.Git.CreateRef(ctx, "o", "r", &github.Reference{Ref: github.String("refs/heads/develop"), Object: base.Object}); status(err) != 422 {
		t.Fatalf("CreateRef of an existing base branch: %v, want 422", err)
	}

	// Pull requests: numbers increase, lookups find them, duplicates are 422.
	for n := 1; n <= 2; n++ {
		head := branch(n)
		pr, _, err := c.PullRequests.Create(ctx, "o", "r", &github.NewPullRequest{
			Title: github.String(fmt.Sprintf("Work on #%d", n)), Head: github.String(head), Base: github.String("develop"), Draft: github.Bool(true),
		})
		if err != nil || pr.GetNumber() != n || !pr.GetDraft() || pr.GetHead().GetRef() != head {
			t.Fatalf("create pull request %d: %+v, %v", n, pr, err)
		}
		if _, _, err := c.PullRequests.Create(ctx, "o", "r", &github.NewPullRequest{
			Title: github.String("again"), Head: github.String(head), Base: github.String("develop"),
		}); status(err) != 422 {
			t.Fatalf("duplicate pull request: %v, want 422", err)
		}
		prs, _, err := c.PullRequests.List(ctx, "o", "r", &github.PullRequestListOptions{State: "open", Head: "o:" + head, Base: "develop"})
		if err != nil || len(prs) != 1 || prs[0].GetNumber() != n {
			t.Fatalf("list pull requests from %s: %d, %v", head, len(prs), err)
		}
		if got, _, err := c.PullRequests.Get(ctx, "o", "r", n); err != nil || got.GetTitle() != fmt.Sprintf("Work on #%d", n) {
			t.Fatalf("get pull request %d: %+v, %v", n, got, err)
		}
	}
	if _, _, err := c.PullRequests.Get(ctx, "o", "r", 99); status(err) != http.StatusNotFound {
		t.Fatalf("get an unknown pull request: %v, want 404", err)
	}
	if _, _, err := c.PullRequests.Create(ctx, "o", "r", &github.NewPullRequest{
		Title: github.String("x"), Head: github.String("gitlease/issue-404"), Base: github.String("develop"),
	}); status(err) != 422 {
		t.Fatalf("pull request from a missing branch: %v, want 422", err)
	}

	// Check runs: ids increase, found by SHA and id, annotations kept and paginated.
	sha := base.GetObject().GetSHA()
	var ids []int64
	for i := range 2 {
		run, _, err := c.Checks.CreateCheckRun(ctx, "o", "r", github.CreateCheckRunOptions{
			Name: "gitlease", HeadSHA: sha, ExternalID: github.String(fmt.Sprint("entry-", i)), Status: github.String("queued"),
			Output: &github.CheckRunOutput{Title: github.String("Queued"), Summary: github.String("waiting")},
		})
		if err != nil || run.GetStatus() != "queued" {
			t.Fatalf("create check run: %+v, %v", run, err)
		}
		ids = append(ids, run.GetID())
	}
	if ids[1] <= ids[0] {
		t.Fatalf("check run ids %v do not increase", ids)
	}
	list, _, err := c.Checks.ListCheckRunsForRef(ctx, "o", "r", sha, &github.ListCheckRunsOptions{CheckName: github.String("gitlease"), Filter: github.String("all")})
	if err != nil || len(list.CheckRuns) != 2 || list.CheckRuns[0].GetExternalID() != "entry-1" {
		t.Fatalf("list check runs (all): %+v, %v", list, err)
	}
	if latest, _, err := c.Checks.ListCheckRunsForRef(ctx, "o", "r", sha, nil); err != nil || len(latest.CheckRuns) != 1 {
		t.Fatalf("list check runs (latest): %+v, %v", latest, err)
	}
	note := func(i int) *github.CheckRunAnnotation {
		return &github.CheckRunAnnotation{Path: github.String(".github"), StartLine: github.Int(1), EndLine: github.Int(1),
			AnnotationLevel: github.String("notice"), Message: github.String(fmt.Sprint("note ", i))}
	}
	var anns []*github.CheckRunAnnotation
	for i := range 120 {
		anns = append(anns, note(i))
	}
	out := func(a []*github.CheckRunAnnotation) *github.CheckRunOutput {
		return &github.CheckRunOutput{Title: github.String("Running"), Summary: github.String("s"), Annotations: a}
	}
	if _, _, err := c.Checks.UpdateCheckRun(ctx, "o", "r", ids[0], github.UpdateCheckRunOptions{Name: "gitlease", Output: out(anns[:51])}); status(err) != 422 {
		t.Fatalf("51 annotations in one request: %v, want 422", err)
	}
	if _, _, err := c.Checks.UpdateCheckRun(ctx, "o", "r", ids[0], github.UpdateCheckRunOptions{Name: "gitlease", Status: github.String("completed")}); status(err) != 422 {
		t.Fatalf("completed without a conclusion: %v, want 422", err)
	}
	for i := 0; i < len(anns); i += 50 {
		if _, _, err := c.Checks.UpdateCheckRun(ctx, "o", "r", ids[0], github.UpdateCheckRunOptions{Name: "gitlease", Output: out(anns[i:min(i+50, len(anns))])}); err != nil {
			t.Fatalf("add annotations: %v", err)
		}
	}
	done, _, err := c.Checks.UpdateCheckRun(ctx, "o", "r", ids[0], github.UpdateCheckRunOptions{Name: "gitlease", Status: github.String("completed"), Conclusion: github.String("success")})
	if err != nil || done.GetStatus() != "completed" || done.GetConclusion() != "success" || done.GetOutput().GetTitle() != "Running" || done.GetOutput().GetAnnotationsCount() != 120 {
		t.Fatalf("conclude check run: %+v, %v", done, err)
	}
	var got []string
	opts := &github.ListOptions{PerPage: 100}
	for {
		page, resp, err := c.Checks.ListCheckRunAnnotations(ctx, "o", "r", ids[0], opts)
		if err != nil {
			t.Fatalf("list annotations: %v", err)
		}
		for _, a := range page {
			got = append(got, a.GetMessage())
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if len(got) != 120 || got[0] != "note 0" || got[119] != "note 119" {
		t.Fatalf("listed %d annotations (%v...), want the 120 written, in order", len(got), got[:min(3, len(got))])
	}
	if run, _, err := c.Checks.GetCheckRun(ctx, "o", "r", ids[0]); err != nil || run.GetConclusion() != "success" {
		t.Fatalf("get check run: %+v, %v", run, err)
	}
	if _, _, err := c.Checks.GetCheckRun(ctx, "o", "r", 9999); status(err) != http.StatusNotFound {
		t.Fatalf("get an unknown check run: %v, want 404", err)
	}
	if _, _, err := c.Checks.GetCheckRun(ctx, "o", "other", ids[0]); status(err) != http.StatusNotFound {
		t.Fatalf("get a check run through another repository: %v, want 404", err)
	}
	if _, _, err := c.Checks.UpdateCheckRun(ctx, "o", "r", 9999, github.UpdateCheckRunOptions{Name: "gitlease"}); status(err) != http.StatusNotFound {
		t.Fatalf("update an unknown check run: %v, want 404", err)
	}

	calls := logs.records(t, "dry-run GitHub call")
	if len(find(calls, map[string]any{"method": "POST", "path": "/repos/o/r/git/refs", "http_status": 422, "ref": "refs/heads/gitlease/issue-1"})) != 1 {
		t.Errorf("the refused duplicate ref is not logged as a 422 write")
	}
	if len(find(calls, map[string]any{"method": "GET"})) != 0 {
		t.Errorf("reads are logged as calls at info level")
	}
	if _, _, err := c.Repositories.Get(ctx, "o", "r"); status(err) != http.StatusNotFound {
		t.Fatalf("an endpoint the recorder does not know: %v, want 404", err)
	}
	if len(logs.records(t, "dry-run GitHub recorder does not know this endpoint; answered 404")) != 1 {
		t.Errorf("an unknown endpoint is not logged as a warning")
	}
}

// TestDryRunIsSafeForConcurrentUse creates pull requests and check runs
// from many goroutines: every number and id is handed out exactly once.
func TestDryRunIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inst, _ := newDryRun(t)
	c, err := inst.Client(1)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	numbers := make([]int, n)
	runIDs := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			base, _, err := c.Git.GetRef(ctx, "o", "r", "heads/main")
			if err != nil {
				t.Error(err)
				return
			}
			commit, _, err := c.Git.CreateCommit(ctx, "o", "r", &github.Commit{Message: github.String("m"),
				Tree: &github.Tree{SHA: github.String("t")}, Parents: []*github.Commit{{SHA: base.Object.SHA}}}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			head := fmt.Sprintf("gitlease/issue-%d", i)
			if _, _, err := c.Git.CreateRef(ctx, "o", "r", &github.Reference{Ref: github.String("refs/heads/" + head), Object: &github.GitObject{SHA: commit.SHA}}); err != nil {
				t.Error(err)
				return
			}
			pr, _, err := c.PullRequests.Create(ctx, "o", "r", &github.NewPullRequest{Title: github.String("t"), Head: github.String(head), Base: github.String("main")})
			if err != nil {
				t.Error(err)
				return
			}
			run, _, err := c.Checks.CreateCheckRun(ctx, "o", "r", github.CreateCheckRunOptions{Name: "gitlease", HeadSHA: commit.GetSHA()})
			if err != nil {
				t.Error(err)
				return
			}
			numbers[i], runIDs[i] = pr.GetNumber(), run.GetID()
		}()
	}
	wg.Wait()
	slices.Sort(numbers)
	slices.Sort(runIDs)
	for i := range n {
		if numbers[i] != i+1 || runIDs[i] != int64(i+1) {
			t.Fatalf("pull request numbers %v, check run ids %v; want each of 1..%d once", numbers, runIDs, n)
		}
	}
}
