package githubtest

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// pull is a pull request.
type pull struct {
	id        int64
	number    int
	title     string
	body      string
	head      string // branch name in the same repository
	headSHA   string // last known head commit
	base      string
	draft     bool
	state     string // open, closed
	byApp     bool
	createdAt time.Time
	updatedAt time.Time
	closedAt  time.Time
}

// GitHub's limits on pull request text.
const (
	maxPullTitle = 256
	maxPullBody  = 65536
)

// liveHead returns the pull request's head SHA: the branch's head while the
// branch exists, as on GitHub.
func (r *repo) liveHead(p *pull) string {
	if sha, ok := r.refs["refs/heads/"+p.head]; ok && p.state == "open" {
		p.headSHA = sha
	}
	return p.headSHA
}

func (s *Server) pullJSON(r *repo, p *pull) map[string]any {
	full := r.fullName()
	headSHA := r.liveHead(p)
	baseSHA := r.refs["refs/heads/"+p.base]
	user := s.botJSON()
	if !p.byApp {
		user = s.accountJSON("octocat", "User")
	}
	var closed any
	if p.state == "closed" {
		closed = ts(p.closedAt)
	}
	side := func(ref, sha string) map[string]any {
		return map[string]any{
			"label": r.owner + ":" + ref, "ref": ref, "sha": sha,
			"user": s.accountJSON(r.owner, "Organization"), "repo": s.repoJSON(r),
		}
	}
	return map[string]any{
		"id": p.id, "node_id": nodeID("PR", p.id), "number": p.number, "state": p.state, "locked": false,
		"title": p.title, "body": p.body, "draft": p.draft, "user": user,
		"url": s.apiURL("repos/%s/pulls/%d", full, p.number), "html_url": s.htmlURL("%s/pull/%d", full, p.number),
		"diff_url": s.htmlURL("%s/pull/%d.diff", full, p.number), "patch_url": s.htmlURL("%s/pull/%d.patch", full, p.number),
		"issue_url":  s.apiURL("repos/%s/issues/%d", full, p.number),
		"created_at": ts(p.createdAt), "updated_at": ts(p.updatedAt), "closed_at": closed, "merged_at": nil,
		"merge_commit_sha": nil, "merged": false, "mergeable": nil, "author_association": "NONE",
		"head": side(p.head, headSHA), "base": side(p.base, baseSHA),
	}
}

// splitHead parses a head of "branch" or "owner:branch".
func splitHead(head string) (owner, branch string) {
	if o, b, ok := strings.Cut(head, ":"); ok {
		return o, b
	}
	return "", head
}

// handleCreatePull serves POST /repos/{owner}/{repo}/pulls.
func (s *Server) handleCreatePull(c *call) response {
	r := c.repo
	if has(c.json, "issue") {
		c.violatef("create pull from an issue: the fake does not model issues; send title and body")
		return c.validationFailed(fieldError{Resource: "PullRequest", Field: "issue", Code: "invalid"})
	}
	title := str(c.json, "title")
	if !has(c.json, "title") || strings.TrimSpace(title) == "" {
		c.violatef("create pull: title is required (unless issue is given)")
		return c.validationFailed(fieldError{Resource: "PullRequest", Field: "title", Code: "missing_field"})
	}
	if n := len([]rune(title)); n > maxPullTitle {
		c.violatef("create pull: title has %d characters, GitHub allows %d", n, maxPullTitle)
		return c.validationFailed(fieldError{Resource: "Issue", Field: "title", Code: "custom", Message: fmt.Sprintf("title is too long (maximum is %d characters)", maxPullTitle)})
	}
	body := str(c.json, "body")
	if n := len([]rune(body)); n > maxPullBody {
		c.violatef("create pull: body has %d characters, GitHub allows %d", n, maxPullBody)
		return c.validationFailed(fieldError{Resource: "Issue", Field: "body", Code: "custom", Message: fmt.Sprintf("body is too long (maximum is %d characters)", maxPullBody)})
	}
	base := str(c.json, "base")
	headOwner, head := splitHead(str(c.json, "head"))
	if headOwner != "" && !strings.EqualFold(headOwner, r.owner) {
		c.violatef("create pull: head %q names another owner's fork; the fake has no forks", str(c.json, "head"))
		return c.validationFailed(fieldError{Resource: "PullRequest", Field: "head", Code: "invalid"})
	}
	s.autoBranch(r, base)
	baseSHA, ok := r.refs["refs/heads/"+base]
	if !ok {
		c.violatef("create pull: base branch %q does not exist in %s", base, r.fullName())
		return c.validationFailed(fieldError{Resource: "PullRequest", Field: "base", Code: "invalid"})
	}
	headSHA, ok := r.refs["refs/heads/"+head]
	if !ok {
		c.violatef("create pull: head branch %q does not exist in %s", head, r.fullName())
		return c.validationFailed(fieldError{Resource: "PullRequest", Field: "head", Code: "invalid"})
	}
	for _, p := range r.pulls {
		if p.state == "open" && p.head == head && p.base == base {
			return c.validationFailed(fieldError{Resource: "PullRequest", Code: "custom",
				Message: fmt.Sprintf("A pull request already exists for %s:%s.", r.owner, head)})
		}
	}
	if head == base || r.isAncestor(headSHA, baseSHA) {
		c.violatef("create pull: no commits between %s and %s", base, head)
		return c.validationFailed(fieldError{Resource: "PullRequest", Code: "custom",
			Message: fmt.Sprintf("No commits between %s and %s", base, head)})
	}
	draft, _ := c.json["draft"].(bool)
	if draft && !r.allowDrafts {
		return c.validationFailed(fieldError{Resource: "PullRequest", Code: "custom",
			Message: "Draft pull requests are not supported in this repository."})
	}
	p := &pull{
		id: s.newID(), number: r.nextNumber, title: title, body: body, head: head, headSHA: headSHA, base: base,
		draft: draft, state: "open", byApp: true, createdAt: c.now.UTC(), updatedAt: c.now.UTC(),
	}
	r.nextNumber++
	r.pulls = append(r.pulls, p)
	return response{status: http.StatusCreated, body: s.pullJSON(r, p)}
}

// handleListPulls serves GET /repos/{owner}/{repo}/pulls with GitHub's
// state, head ("owner:branch"), base, sort, direction and paging.
func (s *Server) handleListPulls(c *call) response {
	r := c.repo
	q := c.r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	var headOwner, headBranch string
	if h := q.Get("head"); h != "" {
		o, b, ok := strings.Cut(h, ":")
		if !ok {
			// GitHub ignores a head filter without "owner:" and lists
			// everything: almost certainly a bug in the caller.
			c.violatef("list pulls: head=%q has no \"owner:\" prefix, so GitHub ignores the filter and lists every pull request", h)
		} else {
			headOwner, headBranch = o, b
		}
	}
	base := q.Get("base")
	var out []*pull
	for _, p := range r.pulls {
		switch {
		case state != "all" && p.state != state:
		case headBranch != "" && (!strings.EqualFold(headOwner, r.owner) || p.head != headBranch):
		case base != "" && p.base != base:
		default:
			out = append(out, p)
		}
	}
	sortBy, dir := q.Get("sort"), q.Get("direction")
	if dir == "" {
		dir = "asc"
		if sortBy == "" || sortBy == "created" {
			dir = "desc"
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		var less bool
		if sortBy == "updated" {
			less = a.updatedAt.Before(b.updatedAt) || a.updatedAt.Equal(b.updatedAt) && a.number < b.number
		} else {
			less = a.number < b.number
		}
		if dir == "desc" {
			return !less
		}
		return less
	})
	lo, hi, link := c.page(len(out))
	list := make([]any, 0, hi-lo)
	for _, p := range out[lo:hi] {
		list = append(list, s.pullJSON(r, p))
	}
	res := response{status: http.StatusOK, body: list}
	if link != "" {
		res.header = map[string]string{"Link": link}
	}
	return res
}

// handleGetPull serves GET /repos/{owner}/{repo}/pulls/{pull_number}.
func (s *Server) handleGetPull(c *call) response {
	n, err := strconv.Atoi(c.r.PathValue("pull_number"))
	if err != nil {
		return c.notFound()
	}
	for _, p := range c.repo.pulls {
		if p.number == n {
			return response{status: http.StatusOK, body: s.pullJSON(c.repo, p)}
		}
	}
	return c.notFound()
}

// AddPullRequest opens a pull request in repo as a person would (author
// octocat, not the App), from branch head to base, both existing branches.
// It returns the pull request. No request is recorded.
func (s *Server) AddPullRequest(repoName, head, base, title, body string, draft bool) PullRequest {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.mustRepo(repoName)
	if r == nil {
		return PullRequest{}
	}
	headSHA, ok1 := r.refs["refs/heads/"+head]
	_, ok2 := r.refs["refs/heads/"+base]
	if !ok1 || !ok2 {
		s.tb.Fatalf("githubtest: AddPullRequest: branches %q and %q must exist in %s", head, base, repoName)
		return PullRequest{}
	}
	now := time.Now().UTC()
	p := &pull{id: s.newID(), number: r.nextNumber, title: title, body: body, head: head, headSHA: headSHA,
		base: base, draft: draft, state: "open", createdAt: now, updatedAt: now}
	r.nextNumber++
	r.pulls = append(r.pulls, p)
	return s.pullSnapshot(r, p)
}
