package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v66/github"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
)

// ProvisionSpec is what an issue item needs on GitHub.
type ProvisionSpec struct {
	Owner, Repo string
	BaseBranch  string // without refs/heads/
	HeadBranch  string // without refs/heads/
	IssueNumber int
	Title       string
	QualifiedID string
	Generation  uint64
	EntryID     string
}

// Provisioned is what exists on GitHub after Provision.
type Provisioned struct {
	HeadSHA           string
	PullRequestNumber int
	PullRequestURL    string
}

// Provisioner creates an issue item's branch and draft pull request.
type Provisioner struct{}

// Provision makes sure spec's head branch and pull request exist, creating
// what is absent: the branch from the base branch's head with one initial
// empty commit, then a draft pull request (a ready one where the repository
// does not allow drafts) whose body closes the issue and carries a hidden
// marker. It never moves a ref that exists, so a retry, a recovery or a
// later generation reuses what the first one made.
func (Provisioner) Provision(ctx context.Context, c *gh.Client, spec ProvisionSpec) (Provisioned, error) {
	sha, err := ensureBranch(ctx, c, spec)
	if err != nil {
		return Provisioned{}, err
	}
	pr, err := ensurePullRequest(ctx, c, spec)
	if err != nil {
		return Provisioned{}, err
	}
	return Provisioned{HeadSHA: sha, PullRequestNumber: pr.GetNumber(), PullRequestURL: pr.GetHTMLURL()}, nil
}

func ensureBranch(ctx context.Context, c *gh.Client, spec ProvisionSpec) (string, error) {
	ref, _, err := c.Git.GetRef(ctx, spec.Owner, spec.Repo, "heads/"+spec.HeadBranch)
	if err == nil {
		return ref.GetObject().GetSHA(), nil
	}
	if !isStatus(err, http.StatusNotFound) {
		return "", fmt.Errorf("look up branch %s: %w", spec.HeadBranch, err)
	}
	base, _, err := c.Git.GetRef(ctx, spec.Owner, spec.Repo, "heads/"+spec.BaseBranch)
	if err != nil {
		if isStatus(err, http.StatusNotFound) {
			return "", &permanentError{fmt.Errorf("base branch %s does not exist", spec.BaseBranch)}
		}
		return "", fmt.Errorf("look up base branch %s: %w", spec.BaseBranch, err)
	}
	baseSHA := base.GetObject().GetSHA()
	baseCommit, _, err := c.Git.GetCommit(ctx, spec.Owner, spec.Repo, baseSHA)
	if err != nil {
		return "", fmt.Errorf("read base commit: %w", err)
	}
	// An empty commit: the base's tree, the base as parent.
	commit, _, err := c.Git.CreateCommit(ctx, spec.Owner, spec.Repo, &gh.Commit{
		Message: gh.String(fmt.Sprintf("gitlease: start work on #%d\n\n%s", spec.IssueNumber, spec.Title)),
		Tree:    &gh.Tree{SHA: baseCommit.GetTree().SHA},
		Parents: []*gh.Commit{{SHA: gh.String(baseSHA)}},
	}, nil)
	if err != nil {
		return "", fmt.Errorf("create initial commit: %w", err)
	}
	created, _, err := c.Git.CreateRef(ctx, spec.Owner, spec.Repo, &gh.Reference{
		Ref: gh.String("refs/heads/" + spec.HeadBranch), Object: &gh.GitObject{SHA: commit.SHA},
	})
	if err == nil {
		return created.GetObject().GetSHA(), nil
	}
	if !isStatus(err, http.StatusUnprocessableEntity) {
		return "", fmt.Errorf("create branch %s: %w", spec.HeadBranch, err)
	}
	// Someone (an earlier attempt whose answer was lost) created it: use it as it is.
	ref, _, err = c.Git.GetRef(ctx, spec.Owner, spec.Repo, "heads/"+spec.HeadBranch)
	if err != nil {
		return "", fmt.Errorf("look up branch %s after it existed: %w", spec.HeadBranch, err)
	}
	return ref.GetObject().GetSHA(), nil
}

// marker is the hidden comment that ties a pull request to its item.
func marker(spec ProvisionSpec) string {
	b, _ := json.Marshal(map[string]any{"qualified_id": spec.QualifiedID, "generation": spec.Generation, "entry_id": spec.EntryID})
	return "<!-- gitlease " + string(b) + " -->"
}

func ensurePullRequest(ctx context.Context, c *gh.Client, spec ProvisionSpec) (*gh.PullRequest, error) {
	if pr, err := findPullRequest(ctx, c, spec); pr != nil || err != nil {
		return pr, err
	}
	body := fmt.Sprintf("Closes #%d\n\ngitlease opened this draft pull request for generation %d of %s.\n\n%s",
		spec.IssueNumber, spec.Generation, spec.QualifiedID, marker(spec))
	np := &gh.NewPullRequest{
		Title: gh.String(orDefault(spec.Title, fmt.Sprintf("Work on #%d", spec.IssueNumber))),
		Head:  gh.String(spec.HeadBranch), Base: gh.String(spec.BaseBranch),
		Body: gh.String(body), Draft: gh.Bool(true),
	}
	pr, _, err := c.PullRequests.Create(ctx, spec.Owner, spec.Repo, np)
	if err != nil && isStatus(err, http.StatusUnprocessableEntity) && strings.Contains(strings.ToLower(errText(err)), "draft") {
		np.Draft = gh.Bool(false) // the repository does not allow drafts
		pr, _, err = c.PullRequests.Create(ctx, spec.Owner, spec.Repo, np)
	}
	if err == nil {
		return pr, nil
	}
	if isStatus(err, http.StatusUnprocessableEntity) {
		if pr, ferr := findPullRequest(ctx, c, spec); pr != nil || ferr != nil {
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
func findPullRequest(ctx context.Context, c *gh.Client, spec ProvisionSpec) (*gh.PullRequest, error) {
	prs, _, err := c.PullRequests.List(ctx, spec.Owner, spec.Repo, &gh.PullRequestListOptions{
		State: "open", Head: spec.Owner + ":" + spec.HeadBranch, Base: spec.BaseBranch,
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
func (s *Sender) provision(ctx context.Context, row dbq.Outbox) error {
	var req provisionRequest
	if err := decodePayload(row, &req); err != nil {
		return err
	}
	t, err := s.targetOf(ctx, row)
	if err != nil {
		return err
	}
	w, m, c := t.w, t.m, t.c
	if w.Status != "assigned" || w.LeaseGeneration != req.LeaseGeneration || t.g.Branch != nil {
		return nil // superseded: a newer lease asks again if it needs to
	}
	if w.BaseRef == nil || w.HeadRef == nil {
		return &permanentError{errors.New("issue item has no reservation")}
	}
	var d struct {
		Subject struct {
			Title string `json:"title"`
		} `json:"subject"`
	}
	_ = json.Unmarshal(w.Dispatch, &d)
	owner, repo, _ := strings.Cut(m.Repository, "/")
	spec := ProvisionSpec{
		Owner: owner, Repo: repo,
		BaseBranch: strings.TrimPrefix(*w.BaseRef, "refs/heads/"), HeadBranch: strings.TrimPrefix(*w.HeadRef, "refs/heads/"),
		IssueNumber: m.Number, Title: d.Subject.Title, QualifiedID: deref(w.CanonicalID),
		Generation: uint64(derefInt(w.SubjectGeneration)), EntryID: w.ID.String(),
	}
	got, err := Provisioner{}.Provision(ctx, c, spec)
	if err != nil {
		return err
	}
	_, err = s.q.GitHubItemRecordProvisioning(ctx, s.pool, dbq.GitHubItemRecordProvisioningParams{
		EntryID: w.ID, LeaseGeneration: req.LeaseGeneration, Branch: spec.HeadBranch, HeadSha: got.HeadSHA,
		PrNumber: int32(got.PullRequestNumber), PrUrl: got.PullRequestURL,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		s.logger.InfoContext(ctx, "provisioning result discarded: the lease moved on", "entry_id", w.ID.String())
		return nil
	}
	if err != nil {
		return fmt.Errorf("record provisioning: %w", err)
	}
	return nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func derefInt(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
