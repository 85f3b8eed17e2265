package githubtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v66/github"

	"github.com/gitlease/gitlease/app/githubtest"
)

// reporter is a Reporter that is not a testing.TB, as outside tests: it
// keeps what it is told.
type reporter struct {
	mu             sync.Mutex
	errors, fatals []string
}

func (r *reporter) Helper() {}

func (r *reporter) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *reporter) Fatalf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
}

func (r *reporter) reported() (errs, fatals []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errors), slices.Clone(r.fatals)
}

// notIssueBranch is dev's isBase: every branch exists but gitlease's own
// issue head branches.
func notIssueBranch(branch string) bool { return !strings.HasPrefix(branch, "gitlease/issue-") }

// newHandler returns a listener-less fake reporting to a reporter, and a
// client of installation id talking to it in process, as gitlease dev
// builds them.
func newHandler(t *testing.T, id int64, opts ...githubtest.Option) (*githubtest.Server, *github.Client, *reporter) {
	t.Helper()
	rep := &reporter{}
	s, err := githubtest.NewHandler(rep, opts...)
	if err != nil {
		t.Fatal(err)
	}
	atr, err := ghinstallation.NewAppsTransport(s.Transport(), s.AppID, s.PrivateKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	atr.BaseURL = s.BaseURL()
	itr := ghinstallation.NewFromAppsTransport(atr, id)
	itr.BaseURL = s.BaseURL()
	c := github.NewClient(&http.Client{Transport: itr})
	if c.BaseURL, err = url.Parse(s.URL()); err != nil {
		t.Fatal(err)
	}
	return s, c, rep
}

// TestNewHandlerAutoCreate checks what WithAutoCreate creates on first use
// and what stays strict, with and without it.
func TestNewHandlerAutoCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []githubtest.Option
		ref  string
		// want is the status of GET git/ref/<ref> in o/r through a token of
		// installation 7, which nobody added.
		want       int
		violations int
	}{
		{"strict: no installation 7", nil, "heads/main", 0, 1},
		{"auto: default branch", []githubtest.Option{githubtest.WithAutoCreate(nil)}, "heads/main", 200, 0},
		{"auto: no other branch without isBase", []githubtest.Option{githubtest.WithAutoCreate(nil)}, "heads/develop", 404, 0},
		{"auto: a base branch", []githubtest.Option{githubtest.WithAutoCreate(notIssueBranch)}, "heads/develop", 200, 0},
		{"auto: not the client's own branch", []githubtest.Option{githubtest.WithAutoCreate(notIssueBranch)}, "heads/gitlease/issue-1", 404, 0},
		{"auto: not a tag", []githubtest.Option{githubtest.WithAutoCreate(notIssueBranch)}, "tags/v1", 404, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, c, rep := newHandler(t, 7, tc.opts...)
			ref, _, err := c.Git.GetRef(ctx, "o", "r", tc.ref)
			if got := errorStatus(err); tc.want == 200 && err != nil || tc.want != 200 && got != tc.want {
				t.Fatalf("GetRef(%s) = %v, status %d; want %d", tc.ref, err, got, tc.want)
			}
			if tc.want == 200 {
				main, ok := s.Branch("o/r", githubtest.AutoDefaultBranch)
				if !ok || ref.GetObject().GetSHA() != main {
					t.Errorf("%s is at %s, want main's initial commit %s", tc.ref, ref.GetObject().GetSHA(), main)
				}
				if cm, ok := s.Commit("o/r", main); !ok || cm.Message != "Initial commit" {
					t.Errorf("main's head = %+v", cm)
				}
			}
			if errs, fatals := rep.reported(); len(errs) != tc.violations || len(fatals) != 0 {
				t.Errorf("reported %q, fatal %q; want %d violations", errs, fatals, tc.violations)
			}
		})
	}
}

// TestNewHandlerAnswersLikeGitHub drives the auto-creating fake through
// go-github, in process, the way the outbox sender does: what the sender
// relies on (404s, 422s, remembered objects, increasing numbers,
// pagination) behaves as on GitHub, and what GitHub rejects is reported
// to the Reporter without failing anything.
func TestNewHandlerAnswersLikeGitHub(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c, rep := newHandler(t, 7, githubtest.WithAutoCreate(notIssueBranch))

	base, _, err := c.Git.GetRef(ctx, "o", "r", "heads/develop")
	if err != nil {
		t.Fatalf("GetRef of a base branch: %v", err)
	}
	baseSHA := base.GetObject().GetSHA()
	baseCommit, _, err := c.Git.GetCommit(ctx, "o", "r", baseSHA)
	if err != nil || baseCommit.GetTree().GetSHA() == "" {
		t.Fatalf("GetCommit of the base: %+v, %v", baseCommit, err)
	}
	branch := func(n int) string {
		t.Helper()
		commit, _, err := c.Git.CreateCommit(ctx, "o", "r", &github.Commit{
			Message: github.String(fmt.Sprintf("start #%d", n)), Tree: baseCommit.GetTree(),
			Parents: []*github.Commit{{SHA: github.String(baseSHA)}},
		}, nil)
		if err != nil {
			t.Fatalf("CreateCommit: %v", err)
		}
		name := fmt.Sprintf("gitlease/issue-%d", n)
		if _, _, err := c.Git.CreateRef(ctx, "o", "r", &github.Reference{Ref: github.String("refs/heads/" + name), Object: &github.GitObject{SHA: commit.SHA}}); err != nil {
			t.Fatalf("CreateRef: %v", err)
		}
		return name
	}
	head := branch(1)
	pr, _, err := c.PullRequests.Create(ctx, "o", "r", &github.NewPullRequest{
		Title: github.String("Work on #1"), Head: github.String(head), Base: github.String("develop"), Draft: github.Bool(true)})
	if err != nil || pr.GetNumber() != 1 || !pr.GetDraft() || !strings.HasPrefix(pr.GetURL(), githubtest.HandlerURL) {
		t.Fatalf("create pull request: %+v, %v", pr, err)
	}
	if pr2, _, err := c.PullRequests.Create(ctx, "o", "r", &github.NewPullRequest{
		Title: github.String("Work on #2"), Head: github.String(branch(2)), Base: github.String("develop")}); err != nil || pr2.GetNumber() != 2 {
		t.Fatalf("second pull request: %+v, %v", pr2, err)
	}
	run, _, err := c.Checks.CreateCheckRun(ctx, "o", "r", github.CreateCheckRunOptions{Name: "gitlease", HeadSHA: baseSHA, Status: github.String("queued")})
	if err != nil {
		t.Fatalf("create check run: %v", err)
	}
	note := func(i int) *github.CheckRunAnnotation {
		return &github.CheckRunAnnotation{Path: github.String(".github"), StartLine: github.Int(1), EndLine: github.Int(1),
			AnnotationLevel: github.String("notice"), Message: github.String(fmt.Sprint("note ", i))}
	}
	out := func(from, to int) *github.CheckRunOutput {
		o := &github.CheckRunOutput{Title: github.String("Running"), Summary: github.String("s")}
		for i := from; i < to; i++ {
			o.Annotations = append(o.Annotations, note(i))
		}
		return o
	}
	for i := 0; i < 120; i += 50 {
		if _, _, err := c.Checks.UpdateCheckRun(ctx, "o", "r", run.GetID(), github.UpdateCheckRunOptions{Name: "gitlease", Output: out(i, min(i+50, 120))}); err != nil {
			t.Fatalf("add annotations: %v", err)
		}
	}
	var got []string
	opts := &github.ListOptions{PerPage: 100}
	for {
		page, resp, err := c.Checks.ListCheckRunAnnotations(ctx, "o", "r", run.GetID(), opts)
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
		t.Fatalf("listed %d annotations through the Link pages, want the 120 written, in order", len(got))
	}

	// What GitHub answers with an error; the violations among them reach
	// the Reporter, nothing fails.
	for _, tc := range []struct {
		name      string
		call      func() error
		status    int
		violation bool
	}{
		{"unknown commit", func() error { _, _, err := c.Git.GetCommit(ctx, "o", "r", strings.Repeat("0", 40)); return err }, 404, false},
		{"issue branch never created", func() error { _, _, err := c.Git.GetRef(ctx, "o", "r", "heads/gitlease/issue-9"); return err }, 404, false},
		{"duplicate ref", func() error {
			_, _, err := c.Git.CreateRef(ctx, "o", "r", &github.Reference{Ref: github.String("refs/heads/" + head), Object: &github.GitObject{SHA: github.String(baseSHA)}})
			return err
		}, 422, false},
		{"duplicate pull request", func() error {
			_, _, err := c.PullRequests.Create(ctx, "o", "r", &github.NewPullRequest{Title: github.String("again"), Head: github.String(head), Base: github.String("develop")})
			return err
		}, 422, false},
		{"unknown pull request", func() error { _, _, err := c.PullRequests.Get(ctx, "o", "r", 99); return err }, 404, false},
		{"pull request from a missing branch", func() error {
			_, _, err := c.PullRequests.Create(ctx, "o", "r", &github.NewPullRequest{Title: github.String("x"), Head: github.String("gitlease/issue-404"), Base: github.String("develop")})
			return err
		}, 422, true},
		{"51 annotations", func() error {
			_, _, err := c.Checks.UpdateCheckRun(ctx, "o", "r", run.GetID(), github.UpdateCheckRunOptions{Name: "gitlease", Output: out(0, 51)})
			return err
		}, 422, true},
		{"completed without a conclusion", func() error {
			_, _, err := c.Checks.UpdateCheckRun(ctx, "o", "r", run.GetID(), github.UpdateCheckRunOptions{Name: "gitlease", Status: github.String("completed")})
			return err
		}, 422, true},
		{"check run through another repository", func() error { _, _, err := c.Checks.GetCheckRun(ctx, "o", "other", run.GetID()); return err }, 404, false},
		{"an endpoint the fake does not serve", func() error {
			_, _, err := c.Issues.CreateComment(ctx, "o", "r", 1, &github.IssueComment{Body: github.String("hi")})
			return err
		}, 404, true},
	} {
		before, _ := rep.reported()
		if got := errorStatus(tc.call()); got != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.status)
		}
		after, _ := rep.reported()
		if reported := len(after) > len(before); reported != tc.violation {
			t.Errorf("%s: reported as a violation: %v, want %v (%q)", tc.name, reported, tc.violation, after[len(before):])
		}
	}

	if runs := s.CheckRuns("o/r"); len(runs) != 1 || len(runs[0].Annotations) != 120 {
		t.Errorf("recorded check runs %+v, want one with 120 annotations", runs)
	}
	if prs := s.PullRequests("o/r"); len(prs) != 2 || prs[0].Base != "develop" || !prs[0].ByApp {
		t.Errorf("recorded pull requests %+v", prs)
	}
	if _, fatals := rep.reported(); len(fatals) != 0 {
		t.Errorf("fatal reports %q", fatals)
	}
}

// TestLogReporterLogsViolations checks that a fake outside tests logs what
// GitHub would reject, as a warning, and answers it as GitHub does.
func TestLogReporterLogsViolations(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	s, err := githubtest.NewHandler(githubtest.LogReporter(slog.New(slog.NewJSONHandler(&logs, nil))), githubtest.WithAutoCreate(nil))
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&http.Client{Transport: s.Transport()}).Get(s.URL() + "repos/o/r/issues")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var rec map[string]any
	if res.StatusCode != http.StatusNotFound || json.Unmarshal(logs.Bytes(), &rec) != nil ||
		rec["level"] != "WARN" || !strings.Contains(fmt.Sprint(rec["msg"]), "GitHub would reject GET /repos/o/r/issues with 404") {
		t.Fatalf("status %d, logged %s", res.StatusCode, logs.Bytes())
	}
}

// TestNewHandlerIsSafeForConcurrentUse provisions branches, pull requests
// and check runs from many goroutines in process: every number and ID is
// handed out exactly once (run with -race).
func TestNewHandlerIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, c, rep := newHandler(t, 1, githubtest.WithAutoCreate(notIssueBranch))
	const n = 40
	numbers := make([]int, n)
	runIDs := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := func() error {
				base, _, err := c.Git.GetRef(ctx, "o", "r", "heads/main")
				if err != nil {
					return err
				}
				parent, _, err := c.Git.GetCommit(ctx, "o", "r", base.GetObject().GetSHA())
				if err != nil {
					return err
				}
				commit, _, err := c.Git.CreateCommit(ctx, "o", "r", &github.Commit{Message: github.String(fmt.Sprint("m", i)),
					Tree: parent.Tree, Parents: []*github.Commit{{SHA: base.Object.SHA}}}, nil)
				if err != nil {
					return err
				}
				head := fmt.Sprintf("gitlease/issue-%d", i)
				if _, _, err := c.Git.CreateRef(ctx, "o", "r", &github.Reference{Ref: github.String("refs/heads/" + head), Object: &github.GitObject{SHA: commit.SHA}}); err != nil {
					return err
				}
				pr, _, err := c.PullRequests.Create(ctx, "o", "r", &github.NewPullRequest{Title: github.String("t"), Head: github.String(head), Base: github.String("main")})
				if err != nil {
					return err
				}
				run, _, err := c.Checks.CreateCheckRun(ctx, "o", "r", github.CreateCheckRunOptions{Name: "gitlease", HeadSHA: commit.GetSHA()})
				if err != nil {
					return err
				}
				numbers[i], runIDs[i] = pr.GetNumber(), run.GetID()
				return nil
			}()
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	slices.Sort(numbers)
	for i := range n {
		if numbers[i] != i+1 {
			t.Fatalf("pull request numbers %v; want each of 1..%d once", numbers, n)
		}
	}
	if slices.Sort(runIDs); len(slices.Compact(runIDs)) != n || runIDs[0] == 0 {
		t.Fatalf("check run ids %v; want %d distinct", runIDs, n)
	}
	if errs, fatals := rep.reported(); len(errs)+len(fatals) != 0 {
		t.Fatalf("reported %q %q", errs, fatals)
	}
}
