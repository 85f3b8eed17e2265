package app

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v66/github"
)

// DryRunAPIURL is the REST base URL of DryRun.GitHubConfig. The .invalid
// top-level domain never resolves (RFC 2606), so a request that somehow
// bypassed the recorder fails instead of reaching anyone.
const DryRunAPIURL = "https://dry-run.invalid/"

// DryRunSlug is the App slug the dry-run recorder answers GET /app with.
const DryRunSlug = "gitlease-dev"

// dryRunMaxBody bounds how much of a request body the recorder reads.
const dryRunMaxBody = 10 << 20

// DryRun is an http.RoundTripper that stands in for the GitHub REST API
// when no App credentials are configured (`gitlease dev`). It answers, in
// process and never over the network, the endpoints gitlease uses: App
// authentication (GET /app, installation access tokens), git refs and
// commits, pull requests, and check runs with their annotations. It is
// stateful like GitHub: what is created is remembered and found again,
// pull request numbers and check run IDs increase, unknown refs, pull
// requests and check runs are 404, a duplicate ref is 422 "Reference
// already exists", with the bodies go-github decodes.
//
// Every write is logged at info level as one "dry-run GitHub call" line with
// the method, the path and a short summary of what it would have sent;
// reads and token requests are logged at debug level, an endpoint it does
// not know at warning level (and answered 404).
//
// Branches named the way gitlease names an issue's head branch (ending in
// issue-<number>) exist only once created; any other branch exists from the
// start, on a synthetic commit, so whatever base branch an item names
// resolves. Requests are routed by their path from the root, as under
// DryRunAPIURL. DryRun is safe for concurrent use.
type DryRun struct {
	logger *slog.Logger
	now    func() time.Time

	mu        sync.Mutex
	repos     map[string]*dryRepo // by lower-case owner/name
	runs      map[int64]*dryCheckRun
	lastRunID int64
	commitSeq int64 // makes every created commit's SHA unique
}

type dryRepo struct {
	owner, name string
	refs        map[string]string // full ref (refs/heads/x) → commit SHA
	commits     map[string]*dryCommit
	pulls       []*dryPull // pulls[i] is number i+1
}

type dryCommit struct {
	sha, tree, message string
	parents            []string
	date               time.Time
}

type dryPull struct {
	number                  int
	title, body, head, base string
	headSHA, baseSHA, state string
	draft                   bool
	createdAt               time.Time
}

type dryCheckRun struct {
	repo                                     string // lower-case owner/name
	id                                       int64
	name, headSHA, externalID, detailsURL    string
	status, conclusion, title, summary, text string
	startedAt, completedAt                   time.Time
	annotations                              []*github.CheckRunAnnotation
}

// NewDryRun returns an empty recorder logging to logger (discarded if nil).
func NewDryRun(logger *slog.Logger) *DryRun {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &DryRun{logger: logger, now: time.Now, repos: map[string]*dryRepo{}, runs: map[int64]*dryCheckRun{}}
}

// GitHubConfig returns a configuration under which NewInstallations talks
// only to d: App ID 1, a 2048-bit RSA key generated now (so the App JWT is
// really signed, with a key nobody else holds), DryRunAPIURL and d as the
// transport.
func (d *DryRun) GitHubConfig() (GitHubConfig, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return GitHubConfig{}, fmt.Errorf("generate the dry-run App key: %w", err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return GitHubConfig{AppID: 1, PrivateKey: pemKey, APIURL: DryRunAPIURL, Transport: d}, nil
}

// dryAnswer is one response of the recorder and how it is logged.
type dryAnswer struct {
	status int
	body   any
	header http.Header
	attrs  []any // the summary logged with the call
}

// dryError is GitHub's error body.
type dryError struct {
	Message          string         `json:"message"`
	Errors           []github.Error `json:"errors,omitempty"`
	DocumentationURL string         `json:"documentation_url,omitempty"`
}

func dryFail(status int, message string, errs ...github.Error) dryAnswer {
	return dryAnswer{status: status, body: dryError{Message: message, Errors: errs, DocumentationURL: "https://docs.github.com/rest"}}
}

func dryNotFound() dryAnswer { return dryFail(http.StatusNotFound, "Not Found") }

func dryInvalid(resource, field, code string) dryAnswer {
	return dryFail(http.StatusUnprocessableEntity, "Validation Failed", github.Error{Resource: resource, Field: field, Code: code})
}

// RoundTrip answers req as GitHub would, from d's state. It never sends
// anything over the network.
func (d *DryRun) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		// The RoundTripper contract: the body is closed, even on errors.
		var err error
		body, err = io.ReadAll(io.LimitReader(req.Body, dryRunMaxBody))
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("dry-run GitHub: read request body: %w", err)
		}
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	path := "/" + strings.Trim(req.URL.Path, "/")
	write := req.Method != http.MethodGet && req.Method != http.MethodHead

	var a dryAnswer
	known := true
	if req.Header.Get("Authorization") == "" {
		a = dryFail(http.StatusUnauthorized, "Requires authentication")
	} else {
		d.mu.Lock()
		a, known = d.route(req, path, body)
		d.mu.Unlock()
	}

	attrs := append([]any{"method", req.Method, "path", path, "http_status", a.status}, a.attrs...)
	switch {
	case !known:
		d.logger.WarnContext(req.Context(), "dry-run GitHub recorder does not know this endpoint; answered 404", attrs...)
	case write && !strings.HasPrefix(path, "/app/"):
		d.logger.InfoContext(req.Context(), "dry-run GitHub call", attrs...)
	default:
		d.logger.DebugContext(req.Context(), "dry-run GitHub request", attrs...)
	}
	return d.response(req, a)
}

func (d *DryRun) response(req *http.Request, a dryAnswer) (*http.Response, error) {
	b, err := json.Marshal(a.body)
	if err != nil {
		return nil, fmt.Errorf("dry-run GitHub: encode answer: %w", err)
	}
	h := a.header
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	// Request must be set: go-github's error messages read it.
	return &http.Response{
		Status: fmt.Sprintf("%d %s", a.status, http.StatusText(a.status)), StatusCode: a.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), Request: req,
	}, nil
}

// route dispatches one request; known is false for an endpoint the
// recorder does not implement. d.mu is held.
func (d *DryRun) route(req *http.Request, path string, body []byte) (a dryAnswer, known bool) {
	seg := strings.Split(strings.TrimPrefix(path, "/"), "/")
	m := req.Method
	switch {
	case len(seg) == 1 && seg[0] == "app" && m == http.MethodGet:
		return d.getApp(), true
	case len(seg) == 4 && seg[0] == "app" && seg[1] == "installations" && seg[3] == "access_tokens" && m == http.MethodPost:
		return d.accessToken(seg[2]), true
	case len(seg) < 4 || seg[0] != "repos":
		return dryNotFound(), false
	}
	r := d.repo(seg[1], seg[2])
	rest := seg[3:]
	switch {
	case rest[0] == "git" && len(rest) >= 4 && rest[1] == "ref" && m == http.MethodGet:
		return d.getRef(r, strings.Join(rest[2:], "/")), true
	case rest[0] == "git" && len(rest) == 3 && rest[1] == "commits" && m == http.MethodGet:
		return d.getCommit(r, rest[2]), true
	case rest[0] == "git" && len(rest) == 2 && rest[1] == "commits" && m == http.MethodPost:
		return d.createCommit(r, body), true
	case rest[0] == "git" && len(rest) == 2 && rest[1] == "refs" && m == http.MethodPost:
		return d.createRef(r, body), true
	case rest[0] == "pulls" && len(rest) == 1 && m == http.MethodGet:
		return d.listPulls(req, r), true
	case rest[0] == "pulls" && len(rest) == 1 && m == http.MethodPost:
		return d.createPull(r, body), true
	case rest[0] == "pulls" && len(rest) == 2 && m == http.MethodGet:
		return d.getPull(r, rest[1]), true
	case rest[0] == "commits" && len(rest) == 3 && rest[2] == "check-runs" && m == http.MethodGet:
		return d.listCheckRuns(req, r, rest[1]), true
	case rest[0] == "check-runs" && len(rest) == 1 && m == http.MethodPost:
		return d.createCheckRun(r, body), true
	case rest[0] == "check-runs" && len(rest) == 2 && m == http.MethodGet:
		return d.getCheckRun(r, rest[1]), true
	case rest[0] == "check-runs" && len(rest) == 2 && m == http.MethodPatch:
		return d.updateCheckRun(r, rest[1], body), true
	case rest[0] == "check-runs" && len(rest) == 3 && rest[2] == "annotations" && m == http.MethodGet:
		return d.listAnnotations(req, r, rest[1]), true
	}
	return dryNotFound(), false
}

// repo returns the repository's state, creating it: every repository
// exists for the recorder.
func (d *DryRun) repo(owner, name string) *dryRepo {
	key := strings.ToLower(owner + "/" + name)
	r, ok := d.repos[key]
	if !ok {
		r = &dryRepo{owner: owner, name: name, refs: map[string]string{}, commits: map[string]*dryCommit{}}
		d.repos[key] = r
	}
	return r
}

func (r *dryRepo) full() string { return r.owner + "/" + r.name }

func (r *dryRepo) apiURL(format string, args ...any) string {
	return strings.TrimSuffix(DryRunAPIURL, "/") + "/repos/" + r.full() + fmt.Sprintf(format, args...)
}

func (r *dryRepo) htmlURL(format string, args ...any) string {
	// Not github.com: these pull requests and check runs exist nowhere.
	return strings.TrimSuffix(DryRunAPIURL, "/") + "/" + r.full() + fmt.Sprintf(format, args...)
}

// isIssueBranch reports whether branch is named like an issue's head
// branch (<prefix>issue-<number>), whatever the configured prefix.
func isIssueBranch(branch string) bool {
	i := strings.LastIndex(branch, "issue-")
	if i < 0 {
		return false
	}
	n := branch[i+len("issue-"):]
	return n != "" && strings.Trim(n, "0123456789") == ""
}

// resolve returns the SHA a full ref points at. A branch not named like an
// issue's head branch springs into existence on a synthetic commit.
func (d *DryRun) resolve(r *dryRepo, ref string) (string, bool) {
	if sha, ok := r.refs[ref]; ok {
		return sha, true
	}
	branch, ok := strings.CutPrefix(ref, "refs/heads/")
	if !ok || branch == "" || isIssueBranch(branch) {
		return "", false
	}
	sha := dryHash("dry-run branch", r.full(), branch)
	r.commits[sha] = &dryCommit{
		sha: sha, tree: dryHash("dry-run tree", r.full(), branch),
		message: "Synthetic head of " + branch + " (gitlease dry run)", date: d.now(),
	}
	r.refs[ref] = sha
	return sha, true
}

func dryHash(parts ...string) string {
	h := sha1.Sum([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:])
}

func (d *DryRun) getApp() dryAnswer {
	return dryAnswer{status: http.StatusOK, body: &github.App{
		ID: github.Int64(1), Slug: github.String(DryRunSlug), Name: github.String("gitlease (dry run)"),
		HTMLURL: github.String(strings.TrimSuffix(DryRunAPIURL, "/") + "/apps/" + DryRunSlug),
	}}
}

func (d *DryRun) accessToken(installation string) dryAnswer {
	id, err := strconv.ParseInt(installation, 10, 64)
	if err != nil || id <= 0 {
		return dryNotFound()
	}
	// Plainly not a GitHub token, should it end up in a worker's environment.
	return dryAnswer{status: http.StatusCreated, attrs: []any{"installation", id}, body: &github.InstallationToken{
		Token:     github.String(fmt.Sprintf("dry-run-token-installation-%d", id)),
		ExpiresAt: &github.Timestamp{Time: d.now().Add(time.Hour).UTC().Truncate(time.Second)},
	}}
}

func (r *dryRepo) reference(ref, sha string) *github.Reference {
	return &github.Reference{
		Ref: github.String(ref), URL: github.String(r.apiURL("/git/%s", ref)),
		Object: &github.GitObject{Type: github.String("commit"), SHA: github.String(sha), URL: github.String(r.apiURL("/git/commits/%s", sha))},
	}
}

func (d *DryRun) getRef(r *dryRepo, ref string) dryAnswer {
	full := "refs/" + ref
	sha, ok := d.resolve(r, full)
	if !ok {
		return dryNotFound()
	}
	return dryAnswer{status: http.StatusOK, body: r.reference(full, sha)}
}

func (r *dryRepo) commit(c *dryCommit) *github.Commit {
	who := &github.CommitAuthor{Name: github.String(DryRunSlug + "[bot]"), Email: github.String("dry-run@invalid"), Date: &github.Timestamp{Time: c.date}}
	gc := &github.Commit{
		SHA: github.String(c.sha), Message: github.String(c.message), Author: who, Committer: who,
		Tree:    &github.Tree{SHA: github.String(c.tree)},
		URL:     github.String(r.apiURL("/git/commits/%s", c.sha)),
		HTMLURL: github.String(r.htmlURL("/commit/%s", c.sha)),
	}
	for _, p := range c.parents {
		gc.Parents = append(gc.Parents, &github.Commit{SHA: github.String(p), URL: github.String(r.apiURL("/git/commits/%s", p))})
	}
	return gc
}

func (d *DryRun) getCommit(r *dryRepo, sha string) dryAnswer {
	c, ok := r.commits[sha]
	if !ok {
		return dryNotFound()
	}
	return dryAnswer{status: http.StatusOK, body: r.commit(c)}
}

func (d *DryRun) createCommit(r *dryRepo, body []byte) dryAnswer {
	var in struct {
		Message *string  `json:"message"`
		Tree    *string  `json:"tree"`
		Parents []string `json:"parents"`
	}
	if json.Unmarshal(body, &in) != nil {
		return dryFail(http.StatusBadRequest, "Problems parsing JSON")
	}
	if in.Message == nil {
		return dryInvalid("Commit", "message", "missing_field")
	}
	if in.Tree == nil || *in.Tree == "" {
		return dryInvalid("Commit", "tree", "missing_field")
	}
	for _, p := range in.Parents {
		if _, ok := r.commits[p]; !ok {
			return dryFail(http.StatusUnprocessableEntity, "Parent SHA does not exist or is not a commit object")
		}
	}
	d.commitSeq++
	c := &dryCommit{
		sha:  dryHash("dry-run commit", r.full(), *in.Tree, strings.Join(in.Parents, ","), *in.Message, strconv.FormatInt(d.commitSeq, 10)),
		tree: *in.Tree, message: *in.Message, parents: in.Parents, date: d.now(),
	}
	r.commits[c.sha] = c
	subject, _, _ := strings.Cut(c.message, "\n")
	return dryAnswer{status: http.StatusCreated, body: r.commit(c),
		attrs: []any{"message", dryShort(subject), "parents", strings.Join(in.Parents, ","), "sha", c.sha}}
}

func (d *DryRun) createRef(r *dryRepo, body []byte) dryAnswer {
	var in struct {
		Ref *string `json:"ref"`
		SHA *string `json:"sha"`
	}
	if json.Unmarshal(body, &in) != nil {
		return dryFail(http.StatusBadRequest, "Problems parsing JSON")
	}
	ref, sha := "", ""
	if in.Ref != nil {
		ref = *in.Ref
	}
	if in.SHA != nil {
		sha = *in.SHA
	}
	attrs := []any{"ref", ref, "sha", sha}
	if !strings.HasPrefix(ref, "refs/") || strings.Count(ref, "/") < 2 || strings.HasSuffix(ref, "/") {
		a := dryFail(http.StatusUnprocessableEntity, "Reference name must start with 'refs/' and have at least two slashes.")
		a.attrs = attrs
		return a
	}
	if _, ok := r.commits[sha]; !ok {
		a := dryFail(http.StatusUnprocessableEntity, "Object does not exist")
		a.attrs = attrs
		return a
	}
	if _, exists := d.resolve(r, ref); exists {
		a := dryFail(http.StatusUnprocessableEntity, "Reference already exists")
		a.attrs = attrs
		return a
	}
	r.refs[ref] = sha
	return dryAnswer{status: http.StatusCreated, body: r.reference(ref, sha), attrs: attrs}
}

func (r *dryRepo) pull(p *dryPull) *github.PullRequest {
	created := &github.Timestamp{Time: p.createdAt}
	branch := func(owner, ref, sha string) *github.PullRequestBranch {
		return &github.PullRequestBranch{Label: github.String(owner + ":" + ref), Ref: github.String(ref), SHA: github.String(sha),
			Repo: &github.Repository{Name: github.String(r.name), FullName: github.String(r.full()), Owner: &github.User{Login: github.String(r.owner)}}}
	}
	return &github.PullRequest{
		ID: github.Int64(int64(p.number)), Number: github.Int(p.number), State: github.String(p.state),
		Title: github.String(p.title), Body: github.String(p.body), Draft: github.Bool(p.draft),
		CreatedAt: created, UpdatedAt: created,
		User:    &github.User{Login: github.String(DryRunSlug + "[bot]"), Type: github.String("Bot")},
		URL:     github.String(r.apiURL("/pulls/%d", p.number)),
		HTMLURL: github.String(r.htmlURL("/pull/%d", p.number)),
		Head:    branch(r.owner, p.head, p.headSHA), Base: branch(r.owner, p.base, p.baseSHA),
	}
}

func (d *DryRun) createPull(r *dryRepo, body []byte) dryAnswer {
	var in github.NewPullRequest
	if json.Unmarshal(body, &in) != nil {
		return dryFail(http.StatusBadRequest, "Problems parsing JSON")
	}
	p := &dryPull{title: in.GetTitle(), body: in.GetBody(), base: in.GetBase(), draft: in.GetDraft(), state: "open", createdAt: d.now()}
	// head is "branch" or "owner:branch"; the recorder has no forks, so
	// the branch is looked up in this repository either way.
	p.head = in.GetHead()
	if _, branch, ok := strings.Cut(p.head, ":"); ok {
		p.head = branch
	}
	attrs := []any{"title", dryShort(p.title), "head", p.head, "base", p.base, "draft", p.draft}
	fail := func(a dryAnswer) dryAnswer { a.attrs = attrs; return a }
	if p.title == "" {
		return fail(dryInvalid("PullRequest", "title", "missing_field"))
	}
	var ok bool
	if p.headSHA, ok = d.resolve(r, "refs/heads/"+p.head); !ok {
		return fail(dryInvalid("PullRequest", "head", "invalid"))
	}
	if p.baseSHA, ok = d.resolve(r, "refs/heads/"+p.base); !ok {
		return fail(dryInvalid("PullRequest", "base", "invalid"))
	}
	if p.head == p.base || p.headSHA == p.baseSHA {
		return fail(dryFail(http.StatusUnprocessableEntity, "Validation Failed",
			github.Error{Resource: "PullRequest", Code: "custom", Message: "No commits between " + p.base + " and " + p.head}))
	}
	for _, o := range r.pulls {
		if o.state == "open" && o.head == p.head && o.base == p.base {
			return fail(dryFail(http.StatusUnprocessableEntity, "Validation Failed",
				github.Error{Resource: "PullRequest", Code: "custom", Message: "A pull request already exists for " + r.owner + ":" + p.head + "."}))
		}
	}
	p.number = len(r.pulls) + 1
	r.pulls = append(r.pulls, p)
	return dryAnswer{status: http.StatusCreated, body: r.pull(p), attrs: append(attrs, "number", p.number)}
}

func (d *DryRun) getPull(r *dryRepo, number string) dryAnswer {
	n, err := strconv.Atoi(number)
	if err != nil || n < 1 || n > len(r.pulls) {
		return dryNotFound()
	}
	return dryAnswer{status: http.StatusOK, body: r.pull(r.pulls[n-1])}
}

func (d *DryRun) listPulls(req *http.Request, r *dryRepo) dryAnswer {
	q := req.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	headOwner, head, hasOwner := strings.Cut(q.Get("head"), ":")
	if !hasOwner {
		head, headOwner = headOwner, ""
	}
	var found []*github.PullRequest
	// Newest first, GitHub's default order.
	for _, p := range slices.Backward(r.pulls) {
		switch {
		case state != "all" && p.state != state,
			head != "" && p.head != head,
			headOwner != "" && !strings.EqualFold(headOwner, r.owner),
			q.Get("base") != "" && p.base != q.Get("base"):
			continue
		}
		found = append(found, r.pull(p))
	}
	lo, hi, h := dryPage(req, len(found))
	return dryAnswer{status: http.StatusOK, body: nonNil(found[lo:hi]), header: h}
}

func (r *dryRepo) checkRun(c *dryCheckRun) *github.CheckRun {
	run := &github.CheckRun{
		ID: github.Int64(c.id), Name: github.String(c.name), HeadSHA: github.String(c.headSHA),
		Status:    github.String(c.status),
		StartedAt: &github.Timestamp{Time: c.startedAt},
		URL:       github.String(r.apiURL("/check-runs/%d", c.id)),
		HTMLURL:   github.String(r.htmlURL("/runs/%d", c.id)),
		App:       &github.App{ID: github.Int64(1), Slug: github.String(DryRunSlug)},
		Output: &github.CheckRunOutput{
			Title: github.String(c.title), Summary: github.String(c.summary),
			AnnotationsCount: github.Int(len(c.annotations)),
			AnnotationsURL:   github.String(r.apiURL("/check-runs/%d/annotations", c.id)),
		},
	}
	if c.text != "" {
		run.Output.Text = github.String(c.text)
	}
	if c.externalID != "" {
		run.ExternalID = github.String(c.externalID)
	}
	if c.detailsURL != "" {
		run.DetailsURL = github.String(c.detailsURL)
	}
	if c.conclusion != "" {
		run.Conclusion = github.String(c.conclusion)
		run.CompletedAt = &github.Timestamp{Time: c.completedAt}
	}
	return run
}

// runOf finds check run id in r; a run of another repository is not found,
// as on GitHub.
func (d *DryRun) runOf(r *dryRepo, id string) (*dryCheckRun, bool) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return nil, false
	}
	c, ok := d.runs[n]
	if !ok || c.repo != strings.ToLower(r.full()) {
		return nil, false
	}
	return c, true
}

func dryValidStatus(s string) bool {
	switch s {
	case "queued", "in_progress", "completed", "waiting", "requested", "pending":
		return true
	}
	return false
}

func dryValidConclusion(s string) bool {
	switch s {
	case "action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out":
		return true
	}
	return false
}

func dryValidLevel(s string) bool { return s == "notice" || s == "warning" || s == "failure" }

// applyCheckRun validates a create or update's fields and applies them to
// c. On an error answer c is unchanged.
func (d *DryRun) applyCheckRun(c *dryCheckRun, status, conclusion *string, out *github.CheckRunOutput) (dryAnswer, bool) {
	next := *c
	if status != nil {
		if !dryValidStatus(*status) {
			return dryInvalid("CheckRun", "status", "invalid"), false
		}
		next.status = *status
		if *status != "completed" {
			next.conclusion = ""
		}
	}
	if conclusion != nil && *conclusion != "" {
		if !dryValidConclusion(*conclusion) {
			return dryInvalid("CheckRun", "conclusion", "invalid"), false
		}
		// As on GitHub, a conclusion completes the run.
		next.conclusion, next.status = *conclusion, "completed"
	}
	if next.status == "completed" && next.conclusion == "" {
		return dryInvalid("CheckRun", "conclusion", "missing_field"), false
	}
	if next.status == "completed" && c.conclusion == "" {
		next.completedAt = d.now()
	}
	var anns []*github.CheckRunAnnotation
	if out != nil {
		if out.GetTitle() == "" || out.GetSummary() == "" {
			return dryFail(http.StatusUnprocessableEntity, "Invalid request.\n\n\"title\" and \"summary\" are required in \"output\"."), false
		}
		if len(out.Annotations) > maxAnnotations {
			return dryFail(http.StatusUnprocessableEntity, "Invalid request.\n\nOnly 50 annotations are allowed per request."), false
		}
		for _, a := range out.Annotations {
			if a.GetPath() == "" || a.StartLine == nil || a.EndLine == nil || a.GetMessage() == "" || !dryValidLevel(a.GetAnnotationLevel()) {
				return dryInvalid("CheckRun", "output.annotations", "invalid"), false
			}
			anns = append(anns, a)
		}
		next.title, next.summary = out.GetTitle(), out.GetSummary()
		if out.Text != nil {
			next.text = out.GetText()
		}
	}
	next.annotations = append(slices.Clip(c.annotations), anns...)
	*c = next
	return dryAnswer{}, true
}

// checkRunAttrs summarises a check-run write for its log line; what the
// request leaves unchanged is left out.
func checkRunAttrs(status, conclusion *string, out *github.CheckRunOutput) []any {
	var attrs []any
	if status != nil && *status != "" {
		attrs = append(attrs, "status", *status)
	}
	if conclusion != nil && *conclusion != "" {
		attrs = append(attrs, "conclusion", *conclusion)
	}
	n := 0
	if out != nil {
		attrs = append(attrs, "title", dryShort(out.GetTitle()))
		n = len(out.Annotations)
	}
	return append(attrs, "annotations", n)
}

func (d *DryRun) createCheckRun(r *dryRepo, body []byte) dryAnswer {
	var in github.CreateCheckRunOptions
	if json.Unmarshal(body, &in) != nil {
		return dryFail(http.StatusBadRequest, "Problems parsing JSON")
	}
	attrs := append([]any{"name", in.Name, "head_sha", in.HeadSHA}, checkRunAttrs(in.Status, in.Conclusion, in.Output)...)
	fail := func(a dryAnswer) dryAnswer { a.attrs = attrs; return a }
	switch {
	case in.Name == "":
		return fail(dryInvalid("CheckRun", "name", "missing_field"))
	case in.HeadSHA == "":
		return fail(dryInvalid("CheckRun", "head_sha", "missing_field"))
	}
	c := &dryCheckRun{
		repo: strings.ToLower(r.full()), name: in.Name, headSHA: in.HeadSHA, status: "queued",
		externalID: in.GetExternalID(), detailsURL: in.GetDetailsURL(), startedAt: d.now(),
	}
	if a, ok := d.applyCheckRun(c, in.Status, in.Conclusion, in.Output); !ok {
		return fail(a)
	}
	d.lastRunID++
	c.id = d.lastRunID
	d.runs[c.id] = c
	return dryAnswer{status: http.StatusCreated, body: r.checkRun(c), attrs: append(attrs, "check_run_id", c.id)}
}

func (d *DryRun) updateCheckRun(r *dryRepo, id string, body []byte) dryAnswer {
	var in github.UpdateCheckRunOptions
	if json.Unmarshal(body, &in) != nil {
		return dryFail(http.StatusBadRequest, "Problems parsing JSON")
	}
	var attrs []any
	if n, err := strconv.ParseInt(id, 10, 64); err == nil {
		attrs = append(attrs, "check_run_id", n) // a number, as on the line of its creation
	}
	attrs = append(attrs, checkRunAttrs(in.Status, in.Conclusion, in.Output)...)
	c, ok := d.runOf(r, id)
	if !ok {
		a := dryNotFound()
		a.attrs = attrs
		return a
	}
	if a, ok := d.applyCheckRun(c, in.Status, in.Conclusion, in.Output); !ok {
		a.attrs = attrs
		return a
	}
	if in.Name != "" {
		c.name = in.Name
	}
	if in.ExternalID != nil {
		c.externalID = in.GetExternalID()
	}
	if in.DetailsURL != nil {
		c.detailsURL = in.GetDetailsURL()
	}
	return dryAnswer{status: http.StatusOK, body: r.checkRun(c), attrs: attrs}
}

func (d *DryRun) getCheckRun(r *dryRepo, id string) dryAnswer {
	c, ok := d.runOf(r, id)
	if !ok {
		return dryNotFound()
	}
	return dryAnswer{status: http.StatusOK, body: r.checkRun(c)}
}

func (d *DryRun) listCheckRuns(req *http.Request, r *dryRepo, ref string) dryAnswer {
	sha := ref
	if _, ok := r.commits[ref]; !ok {
		// A branch name, as GitHub also accepts; a SHA it never saw has no runs.
		if s, ok := r.refs["refs/heads/"+ref]; ok {
			sha = s
		}
	}
	q := req.URL.Query()
	var matched []*dryCheckRun
	for _, c := range d.runs {
		if c.repo == strings.ToLower(r.full()) && c.headSHA == sha &&
			(q.Get("check_name") == "" || c.name == q.Get("check_name")) &&
			(q.Get("status") == "" || c.status == q.Get("status")) {
			matched = append(matched, c)
		}
	}
	slices.SortFunc(matched, func(a, b *dryCheckRun) int { return cmp.Compare(b.id, a.id) }) // newest first
	if q.Get("filter") != "all" {
		// filter=latest (GitHub's default): the newest run of each name.
		seen := map[string]bool{}
		matched = slices.DeleteFunc(matched, func(c *dryCheckRun) bool {
			dup := seen[c.name]
			seen[c.name] = true
			return dup
		})
	}
	lo, hi, h := dryPage(req, len(matched))
	runs := []*github.CheckRun{}
	for _, c := range matched[lo:hi] {
		runs = append(runs, r.checkRun(c))
	}
	return dryAnswer{status: http.StatusOK, header: h, body: &github.ListCheckRunsResults{Total: github.Int(len(matched)), CheckRuns: runs}}
}

func (d *DryRun) listAnnotations(req *http.Request, r *dryRepo, id string) dryAnswer {
	c, ok := d.runOf(r, id)
	if !ok {
		return dryNotFound()
	}
	lo, hi, h := dryPage(req, len(c.annotations))
	return dryAnswer{status: http.StatusOK, header: h, body: nonNil(c.annotations[lo:hi])}
}

// dryPage is GitHub's pagination of n results for req: the slice bounds of
// the requested page (per_page 30 by default, at most 100) and a Link
// header naming the next and last pages, which go-github follows.
func dryPage(req *http.Request, n int) (lo, hi int, h http.Header) {
	q := req.URL.Query()
	per, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || per <= 0 {
		per = 30
	}
	per = min(per, 100)
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page <= 0 {
		page = 1
	}
	lo, hi = min((page-1)*per, n), min(page*per, n)
	h = http.Header{}
	last := max(1, (n+per-1)/per)
	if page < last {
		link := func(p int, rel string) string {
			u := *req.URL
			v := u.Query()
			v.Set("page", strconv.Itoa(p))
			u.RawQuery = v.Encode()
			return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
		}
		h.Set("Link", link(page+1, "next")+", "+link(last, "last"))
	}
	return lo, hi, h
}

// nonNil makes an empty list encode as [] rather than null, as GitHub's do.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// dryShort shortens s for a log line.
func dryShort(s string) string {
	const limit = 80
	if r := []rune(s); len(r) > limit {
		return string(r[:limit-1]) + "…"
	}
	return s
}

var _ http.RoundTripper = (*DryRun)(nil)
