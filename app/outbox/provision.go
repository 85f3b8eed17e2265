package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v66/github"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
)

// provisionSpec is what an issue item needs on GitHub.
type provisionSpec struct {
	Owner, Repo string
	BaseBranch  string // without refs/heads/
	HeadBranch  string // without refs/heads/
	IssueNumber int
	Title       string
	QualifiedID string
	Generation  uint64
	EntryID     string
}

// provisioned is what exists on GitHub after Provision.
type provisioned struct {
	HeadSHA           string
	PullRequestNumber int
	PullRequestURL    string
}

// provisioner creates an issue item's branch and draft pull request, one
// step at a time, each retried in place after a transient failure and
// recorded once done (Progress), so a later attempt resumes at the first
// step not yet done.
type provisioner struct {
	Retries github.Retries
	// Progress records what a step created; nil records nothing.
	progress progress
	// att, when set, writes down what GitHub answered each step.
	att *attempt
}

// progress records provisioning steps as they get through.
type progress interface {
	// StartCommit records the initial commit, created before its branch.
	StartCommit(ctx context.Context, sha string) error
	// Branch records that the head branch exists at sha.
	Branch(ctx context.Context, sha string) error
}

// resume is what earlier attempts recorded: the initial commit and the
// branch head, when they exist.
type resume struct {
	StartCommitSHA string
	BranchSHA      string
}

type noProgress struct{}

func (noProgress) StartCommit(context.Context, string) error { return nil }
func (noProgress) Branch(context.Context, string) error      { return nil }

// Provision makes sure spec's head branch and pull request exist, creating
// what is absent: the branch from the base branch's head with one initial
// empty commit, then a draft pull request (a ready one where the repository
// does not allow drafts) whose body closes the issue and carries a hidden
// marker. It creates first and looks up only when GitHub answers that the
// branch or pull request exists, or after an answer that may have been
// lost, so a clean run costs five calls (base ref, base commit, commit,
// branch, pull request). It never moves a ref that exists, so a retry, a
// recovery or a later generation reuses what the first one made. Errors
// are GitHub's (a *github.PermanentError when the base branch does not exist) or
// Progress's.
func (p provisioner) Provision(ctx context.Context, c *gh.Client, spec provisionSpec, from resume) (provisioned, error) {
	if p.progress == nil {
		p.progress = noProgress{}
	}
	sha := from.BranchSHA
	if sha != "" {
		p.att.answered(0, "branch %s at %s (created by an earlier attempt)", spec.HeadBranch, sha)
	} else {
		var err error
		if sha, err = p.ensureBranch(ctx, c, spec, from.StartCommitSHA); err != nil {
			return provisioned{}, err
		}
	}
	pr, err := p.ensurePullRequest(ctx, c, spec)
	if err != nil {
		return provisioned{}, err
	}
	return provisioned{HeadSHA: sha, PullRequestNumber: pr.GetNumber(), PullRequestURL: pr.GetHTMLURL()}, nil
}

// call runs one GitHub call with in-place retries.
func call[T any](ctx context.Context, r github.Retries, f func(lost bool) (T, *gh.Response, error)) (T, error) {
	v, _, err := callStatus(ctx, r, f)
	return v, err
}

// callStatus is call that also returns the HTTP status of the last answer
// (0 when f answered from a lookup rather than with a response of its own).
func callStatus[T any](ctx context.Context, r github.Retries, f func(lost bool) (T, *gh.Response, error)) (T, int, error) {
	status := 0
	v, err := github.Retry(ctx, r, func(_ int, lost bool) (T, error) {
		v, resp, err := f(lost)
		status = statusOf(resp)
		return v, err
	})
	return v, status, err
}

// getBranch returns the SHA the head branch points at, "" when it does
// not exist.
func (p provisioner) getBranch(ctx context.Context, c *gh.Client, spec provisionSpec) (string, error) {
	ref, err := call(ctx, p.Retries, func(bool) (*gh.Reference, *gh.Response, error) {
		return c.Git.GetRef(ctx, spec.Owner, spec.Repo, "heads/"+spec.HeadBranch)
	})
	if github.IsStatus(err, http.StatusNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("look up branch %s: %w", spec.HeadBranch, err)
	}
	return ref.GetObject().GetSHA(), nil
}

func (p provisioner) ensureBranch(ctx context.Context, c *gh.Client, spec provisionSpec, commitSHA string) (string, error) {
	if commitSHA == "" {
		var err error
		if commitSHA, err = p.startCommit(ctx, c, spec); err != nil {
			return "", err
		}
		if err := p.progress.StartCommit(ctx, commitSHA); err != nil {
			return "", err
		}
	}
	created, status, err := callStatus(ctx, p.Retries, func(lost bool) (*gh.Reference, *gh.Response, error) {
		if lost { // an earlier try may have created it: use it as it is
			if sha, err := p.getBranch(ctx, c, spec); err != nil || sha != "" {
				return &gh.Reference{Object: &gh.GitObject{SHA: gh.String(sha)}}, nil, err
			}
		}
		return c.Git.CreateRef(ctx, spec.Owner, spec.Repo, &gh.Reference{
			Ref: gh.String("refs/heads/" + spec.HeadBranch), Object: &gh.GitObject{SHA: gh.String(commitSHA)},
		})
	})
	sha := created.GetObject().GetSHA()
	switch {
	case github.IsStatus(err, http.StatusUnprocessableEntity):
		// It exists (an earlier generation's, or one whose answer was
		// lost): use it as it is, never move it.
		if sha, err = p.getBranch(ctx, c, spec); err == nil && sha == "" {
			err = fmt.Errorf("branch %s: GitHub said it exists, then that it does not", spec.HeadBranch)
		}
		if err == nil {
			p.att.answered(http.StatusUnprocessableEntity, "branch %s exists; found it at %s", spec.HeadBranch, sha)
		}
	case err == nil && status == 0:
		p.att.answered(http.StatusOK, "found branch %s at %s (an earlier try created it)", spec.HeadBranch, sha)
	case err == nil:
		p.att.answered(status, "created branch %s at %s", spec.HeadBranch, sha)
	}
	if err != nil {
		return "", fmt.Errorf("create branch %s: %w", spec.HeadBranch, err)
	}
	if err := p.progress.Branch(ctx, sha); err != nil {
		return "", err
	}
	return sha, nil
}

// startCommit creates the branch's initial empty commit on the base
// branch's head: the base's tree, the base as parent.
func (p provisioner) startCommit(ctx context.Context, c *gh.Client, spec provisionSpec) (string, error) {
	base, err := call(ctx, p.Retries, func(bool) (*gh.Reference, *gh.Response, error) {
		return c.Git.GetRef(ctx, spec.Owner, spec.Repo, "heads/"+spec.BaseBranch)
	})
	if github.IsStatus(err, http.StatusNotFound) {
		return "", &github.PermanentError{Err: fmt.Errorf("base branch %s does not exist", spec.BaseBranch)}
	}
	if err != nil {
		return "", fmt.Errorf("look up base branch %s: %w", spec.BaseBranch, err)
	}
	baseSHA := base.GetObject().GetSHA()
	baseCommit, err := call(ctx, p.Retries, func(bool) (*gh.Commit, *gh.Response, error) {
		return c.Git.GetCommit(ctx, spec.Owner, spec.Repo, baseSHA)
	})
	if err != nil {
		return "", fmt.Errorf("read base commit: %w", err)
	}
	// A commit whose answer was lost is made again: the first stays an
	// unreferenced object, which GitHub collects.
	commit, err := call(ctx, p.Retries, func(bool) (*gh.Commit, *gh.Response, error) {
		return c.Git.CreateCommit(ctx, spec.Owner, spec.Repo, &gh.Commit{
			Message: gh.String(fmt.Sprintf("gitlease: start work on #%d\n\n%s", spec.IssueNumber, spec.Title)),
			Tree:    &gh.Tree{SHA: baseCommit.GetTree().SHA},
			Parents: []*gh.Commit{{SHA: gh.String(baseSHA)}},
		}, nil)
	})
	if err != nil {
		return "", fmt.Errorf("create initial commit: %w", err)
	}
	return commit.GetSHA(), nil
}

// marker is the hidden comment that ties a pull request to its item.
func marker(spec provisionSpec) string {
	b, _ := json.Marshal(map[string]any{"qualified_id": spec.QualifiedID, "generation": spec.Generation, "entry_id": spec.EntryID})
	return "<!-- gitlease " + string(b) + " -->"
}

func (p provisioner) ensurePullRequest(ctx context.Context, c *gh.Client, spec provisionSpec) (*gh.PullRequest, error) {
	body := fmt.Sprintf("Closes #%d\n\ngitlease opened this draft pull request for generation %d of %s.\n\n%s",
		spec.IssueNumber, spec.Generation, spec.QualifiedID, marker(spec))
	np := &gh.NewPullRequest{
		Title: gh.String(orDefault(spec.Title, fmt.Sprintf("Work on #%d", spec.IssueNumber))),
		Head:  gh.String(spec.HeadBranch), Base: gh.String(spec.BaseBranch),
		Body: gh.String(body), Draft: gh.Bool(true),
	}
	create := func(lost bool) (*gh.PullRequest, *gh.Response, error) {
		if lost {
			if pr, err := p.findPullRequest(ctx, c, spec); pr != nil || err != nil {
				return pr, nil, err
			}
		}
		return c.PullRequests.Create(ctx, spec.Owner, spec.Repo, np)
	}
	pr, status, err := callStatus(ctx, p.Retries, create)
	if err != nil && github.IsStatus(err, http.StatusUnprocessableEntity) && strings.Contains(strings.ToLower(errText(err)), "draft") {
		np.Draft = gh.Bool(false) // the repository does not allow drafts
		pr, status, err = callStatus(ctx, p.Retries, create)
	}
	if err == nil {
		switch {
		case status == 0:
			p.att.answered(http.StatusOK, "found open pull request #%d (an earlier try opened it)", pr.GetNumber())
		case pr.GetDraft():
			p.att.answered(status, "opened draft pull request #%d", pr.GetNumber())
		default:
			p.att.answered(status, "opened pull request #%d", pr.GetNumber())
		}
		return pr, nil
	}
	if github.IsStatus(err, http.StatusUnprocessableEntity) {
		if pr, ferr := p.findPullRequest(ctx, c, spec); pr != nil || ferr != nil {
			if pr != nil {
				p.att.answered(http.StatusUnprocessableEntity, "pull request exists; found open pull request #%d", pr.GetNumber())
			}
			return pr, ferr
		}
	}
	return nil, fmt.Errorf("create pull request: %w", err)
}

// errText is the full text of a GitHub error, including its field errors.
func errText(err error) string {
	var r *gh.ErrorResponse
	if !errors.As(err, &r) {
		return err.Error()
	}
	var b strings.Builder
	b.WriteString(r.Message)
	for _, e := range r.Errors {
		b.WriteString(" " + e.Message)
	}
	return b.String()
}

// findPullRequest finds an open pull request from the head branch to the base.
func (p provisioner) findPullRequest(ctx context.Context, c *gh.Client, spec provisionSpec) (*gh.PullRequest, error) {
	prs, err := call(ctx, p.Retries, func(bool) ([]*gh.PullRequest, *gh.Response, error) {
		return c.PullRequests.List(ctx, spec.Owner, spec.Repo, &gh.PullRequestListOptions{
			State: "open", Head: spec.Owner + ":" + spec.HeadBranch, Base: spec.BaseBranch,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list pull requests: %w", err)
	}
	if len(prs) == 0 {
		return nil, nil
	}
	return prs[0], nil
}

// provision performs a provision row: only while the lease that asked is
// still the item's current lease, and it records the result only for that
// lease generation (a stale lease's result is discarded).
func (s *Sender) provision(ctx context.Context, row dbq.Outbox, at *attempt) error {
	var req provisionRequest
	if err := decodePayload(row, &req); err != nil {
		return err
	}
	t, err := s.targetOf(ctx, row)
	if err != nil {
		return err
	}
	w, m, c := t.w, t.m, t.c
	if w.Status() != queue.StatusAssigned || int64(w.LeaseGeneration()) != req.LeaseGeneration || t.g.Branch != nil {
		// Superseded or done: a newer lease asks again if it needs to.
		at.answered(0, "nothing sent: the item is provisioned already or its lease moved on")
		return nil
	}
	res := w.Reservation()
	if res == nil {
		return &github.PermanentError{Err: errors.New("issue item has no reservation")}
	}
	var d struct {
		Subject struct {
			Title string `json:"title"`
		} `json:"subject"`
	}
	_ = json.Unmarshal(w.Dispatch(), &d)
	owner, repo, _ := strings.Cut(m.Repository, "/")
	spec := provisionSpec{
		Owner: owner, Repo: repo,
		BaseBranch: strings.TrimPrefix(res.BaseRef, "refs/heads/"), HeadBranch: strings.TrimPrefix(res.HeadRef, "refs/heads/"),
		IssueNumber: m.Number, Title: d.Subject.Title, QualifiedID: w.QualifiedID(),
		Generation: w.Generation(), EntryID: w.EntryID(),
	}
	prog := &itemProgress{s: s, entry: w.ID(), at: at}
	got, err := provisioner{Retries: s.gh.Retries(), progress: prog, att: at}.Provision(ctx, c, spec,
		resume{StartCommitSHA: dbq.Deref(t.g.StartCommitSha), BranchSHA: dbq.Deref(t.g.BranchSha)})
	if err != nil {
		return err
	}
	_, err = s.q.GitHubItemRecordProvisioning(ctx, s.pool, dbq.GitHubItemRecordProvisioningParams{
		EntryID: w.ID(), LeaseGeneration: req.LeaseGeneration, Branch: spec.HeadBranch, HeadSha: got.HeadSHA,
		PrNumber: int32(got.PullRequestNumber), PrUrl: got.PullRequestURL,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		at.answered(0, "result not recorded: the lease moved on")
		s.logger.InfoContext(ctx, "provisioning result discarded: the lease moved on", "entry_id", w.EntryID())
		return nil
	}
	if err != nil {
		return fmt.Errorf("record provisioning: %w", err)
	}
	return nil
}

// itemProgress records an item's provisioning steps in github_items.
type itemProgress struct {
	s     *Sender
	entry uuid.UUID
	at    *attempt // made once a step got through
}

func (p *itemProgress) StartCommit(ctx context.Context, sha string) error {
	p.at.made = true
	if err := p.s.q.GitHubItemRecordStartCommit(ctx, p.s.pool, dbq.GitHubItemRecordStartCommitParams{EntryID: p.entry, Sha: sha}); err != nil {
		return fmt.Errorf("record the initial commit: %w", err)
	}
	return nil
}

func (p *itemProgress) Branch(ctx context.Context, sha string) error {
	p.at.made = true
	if err := p.s.q.GitHubItemRecordBranchSHA(ctx, p.s.pool, dbq.GitHubItemRecordBranchSHAParams{EntryID: p.entry, Sha: sha}); err != nil {
		return fmt.Errorf("record the branch: %w", err)
	}
	return nil
}
