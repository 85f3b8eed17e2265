package githubtest

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"
)

// repo is a repository and its Git objects.
type repo struct {
	id            int64
	owner, name   string
	defaultBranch string
	allowDrafts   bool
	createdAt     time.Time
	refs          map[string]string // "refs/heads/main" -> commit SHA
	commits       map[string]*commitObj
	commitOrder   []string
	trees         map[string]*treeObj
	blobs         map[string][]byte
	pulls         []*pull
	nextNumber    int
}

func (r *repo) fullName() string { return r.owner + "/" + r.name }

type person struct {
	name, email string
	date        time.Time
}

type commitObj struct {
	sha       string
	message   string
	tree      string
	parents   []string
	author    person
	committer person
	viaAPI    bool
}

type treeEntry struct {
	path, mode, typ, sha string
	size                 int
}

type treeObj struct {
	sha     string
	entries []treeEntry
}

// gitHash is Git's object ID: SHA-1 of "<type> <len>\x00<content>".
func gitHash(typ string, content []byte) (string, []byte) {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", typ, len(content))
	h.Write(content)
	sum := h.Sum(nil)
	return hex.EncodeToString(sum), sum
}

func (r *repo) putBlob(content []byte) string {
	sha, _ := gitHash("blob", content)
	r.blobs[sha] = content
	return sha
}

func (r *repo) putTree(entries []treeEntry) string {
	sort.Slice(entries, func(i, j int) bool { return entries[i].path < entries[j].path })
	var buf []byte
	for _, e := range entries {
		raw, _ := hex.DecodeString(e.sha)
		buf = append(buf, fmt.Sprintf("%s %s\x00", strings.TrimPrefix(e.mode, "0"), e.path)...)
		buf = append(buf, raw...)
	}
	sha, _ := gitHash("tree", buf)
	r.trees[sha] = &treeObj{sha: sha, entries: entries}
	return sha
}

func (r *repo) putCommit(c *commitObj) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tree %s\n", c.tree)
	for _, p := range c.parents {
		fmt.Fprintf(&b, "parent %s\n", p)
	}
	fmt.Fprintf(&b, "author %s <%s> %d +0000\n", c.author.name, c.author.email, c.author.date.Unix())
	fmt.Fprintf(&b, "committer %s <%s> %d +0000\n\n%s", c.committer.name, c.committer.email, c.committer.date.Unix(), c.message)
	c.sha, _ = gitHash("commit", []byte(b.String()))
	if _, ok := r.commits[c.sha]; !ok {
		r.commits[c.sha] = c
		r.commitOrder = append(r.commitOrder, c.sha)
	}
	return c.sha
}

// isAncestor reports whether a is b or an ancestor of b.
func (r *repo) isAncestor(a, b string) bool {
	seen := map[string]bool{}
	stack := []string{b}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if x == a {
			return true
		}
		if seen[x] {
			continue
		}
		seen[x] = true
		if c := r.commits[x]; c != nil {
			stack = append(stack, c.parents...)
		}
	}
	return false
}

// RepoInfo describes a seeded repository.
type RepoInfo struct {
	ID            int64
	FullName      string
	DefaultBranch string
	// HeadSHA is the initial commit on the default branch, TreeSHA its tree.
	HeadSHA, TreeSHA string
}

// AddRepo creates repository owner/name with the given ID and default
// branch, holding one initial commit (a README.md). allowDrafts false makes
// draft pull requests fail as on a plan without drafts.
func (s *Server) AddRepo(owner, name string, id int64, defaultBranch string, allowDrafts bool) RepoInfo {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	full := owner + "/" + name
	if _, ok := s.repos[strings.ToLower(full)]; ok {
		s.tb.Fatalf("githubtest: repository %s already exists", full)
		return RepoInfo{}
	}
	for _, r := range s.repos {
		if r.id == id {
			s.tb.Fatalf("githubtest: repository ID %d already used by %s", id, r.fullName())
			return RepoInfo{}
		}
	}
	if !validRefName("refs/heads/" + defaultBranch) {
		s.tb.Fatalf("githubtest: %q is not a valid branch name", defaultBranch)
		return RepoInfo{}
	}
	r := s.newRepo(owner, name, id, defaultBranch, allowDrafts)
	head := r.refs["refs/heads/"+defaultBranch]
	return RepoInfo{ID: id, FullName: full, DefaultBranch: defaultBranch, HeadSHA: head, TreeSHA: r.commits[head].tree}
}

// newRepo creates and registers repository owner/name holding one initial
// commit (a README.md) on defaultBranch. s.mu is held; the caller has
// checked the name, ID and branch are free and valid.
func (s *Server) newRepo(owner, name string, id int64, defaultBranch string, allowDrafts bool) *repo {
	now := time.Now().UTC()
	r := &repo{
		id: id, owner: owner, name: name, defaultBranch: defaultBranch, allowDrafts: allowDrafts, createdAt: now,
		refs: map[string]string{}, commits: map[string]*commitObj{}, trees: map[string]*treeObj{},
		blobs: map[string][]byte{}, nextNumber: 1,
	}
	blob := r.putBlob([]byte("# " + name + "\n"))
	tree := r.putTree([]treeEntry{{path: "README.md", mode: "100644", typ: "blob", sha: blob, size: len(name) + 3}})
	who := person{name: "Octo Cat", email: "octocat@example.com", date: now}
	r.refs["refs/heads/"+defaultBranch] = r.putCommit(&commitObj{message: "Initial commit", tree: tree, author: who, committer: who})
	s.repos[strings.ToLower(r.fullName())] = r
	s.accountID(owner)
	return r
}

// autoBranch creates branch in r on the default branch's head when
// WithAutoCreate's isBase accepts it and Git allows it, and reports whether
// the branch exists now. s.mu is held.
func (s *Server) autoBranch(r *repo, branch string) bool {
	ref := "refs/heads/" + branch
	if _, ok := r.refs[ref]; ok {
		return true
	}
	if !s.cfg.autoCreate || s.cfg.autoBranch == nil || !s.cfg.autoBranch(branch) ||
		!validRefName(ref) || r.refConflict(ref) != "" {
		return false
	}
	r.refs[ref] = r.refs["refs/heads/"+r.defaultBranch]
	return true
}

// Push adds an empty commit with message on top of branch in repo (creating
// the branch from the default branch's head when it does not exist), as a
// person pushing would, and returns the new head SHA. No request is
// recorded.
func (s *Server) Push(repoName, branch, message string) string {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.mustRepo(repoName)
	if r == nil {
		return ""
	}
	ref := "refs/heads/" + branch
	if !validRefName(ref) {
		s.tb.Fatalf("githubtest: Push: %q is not a valid branch name", branch)
		return ""
	}
	parent, ok := r.refs[ref]
	if !ok {
		parent = r.refs["refs/heads/"+r.defaultBranch]
		if conflict := r.refConflict(ref); conflict != "" {
			s.tb.Fatalf("githubtest: Push: branch %q conflicts with %s", branch, conflict)
			return ""
		}
	}
	who := person{name: "Octo Cat", email: "octocat@example.com", date: time.Now().UTC()}
	sha := r.putCommit(&commitObj{message: message, tree: r.commits[parent].tree, parents: []string{parent}, author: who, committer: who})
	r.refs[ref] = sha
	return sha
}

// ReserveNumbers makes the next pull request of repo get a number above
// upTo: GitHub numbers issues and pull requests from one sequence, so a test
// that sends webhooks for issues 1..upTo should reserve them.
func (s *Server) ReserveNumbers(repoName string, upTo int) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.mustRepo(repoName); r != nil && r.nextNumber <= upTo {
		r.nextNumber = upTo + 1
	}
}

func (s *Server) mustRepo(full string) *repo {
	s.tb.Helper()
	r := s.repos[strings.ToLower(full)]
	if r == nil {
		s.tb.Fatalf("githubtest: no repository %q (use AddRepo)", full)
	}
	return r
}

func (s *Server) repoJSON(r *repo) map[string]any {
	full := r.fullName()
	return map[string]any{
		"id": r.id, "node_id": nodeID("R", r.id), "name": r.name, "full_name": full,
		"owner": s.accountJSON(r.owner, "Organization"), "private": true, "visibility": "private",
		"html_url": s.htmlURL("%s", full), "url": s.apiURL("repos/%s", full), "description": nil,
		"fork": false, "archived": false, "disabled": false, "default_branch": r.defaultBranch,
		"created_at": ts(r.createdAt), "updated_at": ts(r.createdAt), "pushed_at": ts(r.createdAt),
		"git_url":   "git://" + strings.TrimPrefix(s.cfg.htmlURL, "https://") + "/" + full + ".git",
		"clone_url": s.htmlURL("%s.git", full), "ssh_url": "git@" + strings.TrimPrefix(s.cfg.htmlURL, "https://") + ":" + full + ".git",
		"allow_merge_commit": true, "allow_squash_merge": true, "allow_rebase_merge": true,
		"has_issues": true, "open_issues_count": 0,
	}
}

// handleGetRepo serves GET /repos/{owner}/{repo}.
func (s *Server) handleGetRepo(c *call) response {
	return response{status: http.StatusOK, body: s.repoJSON(c.repo)}
}

// ---- refs ----

var badRefChars = regexp.MustCompile(`[\x00-\x20\x7f~^:?*\[\\]`)

// validRefName applies git check-ref-format's rules.
func validRefName(ref string) bool {
	if ref == "@" || strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".") ||
		strings.Contains(ref, "..") || strings.Contains(ref, "//") || strings.Contains(ref, "@{") ||
		badRefChars.MatchString(ref) {
		return false
	}
	for _, comp := range strings.Split(ref, "/") {
		if comp == "" || strings.HasPrefix(comp, ".") || strings.HasSuffix(comp, ".lock") {
			return false
		}
	}
	return true
}

// refConflict returns an existing ref that makes ref impossible in Git
// (one is a directory prefix of the other), "" when there is none.
func (r *repo) refConflict(ref string) string {
	for existing := range r.refs {
		if strings.HasPrefix(existing, ref+"/") || strings.HasPrefix(ref, existing+"/") {
			return existing
		}
	}
	return ""
}

func (s *Server) refJSON(r *repo, ref, sha string) map[string]any {
	return map[string]any{
		"ref": ref, "node_id": nodeID("REF", int64(len(ref))), "url": s.apiURL("repos/%s/git/%s", r.fullName(), ref),
		"object": map[string]any{"sha": sha, "type": "commit", "url": s.apiURL("repos/%s/git/commits/%s", r.fullName(), sha)},
	}
}

// handleGetRef serves GET /repos/{owner}/{repo}/git/ref/{ref} ("heads/x").
// A missing ref is a 404, which is not a violation (it is how clients test
// for existence).
func (s *Server) handleGetRef(c *call) response {
	name := c.r.PathValue("ref")
	if strings.HasPrefix(name, "refs/") {
		c.violatef("GET git/ref/%s: the ref must be given without the refs/ prefix (heads/x); GitHub answers 404", name)
		return c.notFound()
	}
	ref := "refs/" + name
	if branch, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
		s.autoBranch(c.repo, branch)
	}
	sha, ok := c.repo.refs[ref]
	if !ok {
		return c.notFound()
	}
	return response{status: http.StatusOK, body: s.refJSON(c.repo, ref, sha)}
}

// handleCreateRef serves POST /repos/{owner}/{repo}/git/refs.
func (s *Server) handleCreateRef(c *call) response {
	ref, sha := str(c.json, "ref"), str(c.json, "sha")
	if !strings.HasPrefix(ref, "refs/") || strings.Count(ref, "/") < 2 {
		c.violatef("ref %q must start with refs/ and have at least two slashes", ref)
		return c.fail(http.StatusUnprocessableEntity, "Reference name must start with 'refs/' and contain at least three slash-separated components.")
	}
	if !validRefName(ref) {
		c.violatef("%q is not a valid Git ref name", ref)
		return c.fail(http.StatusUnprocessableEntity, ref+" is not a valid ref name.")
	}
	if _, ok := c.repo.refs[ref]; ok {
		return c.fail(http.StatusUnprocessableEntity, "Reference already exists")
	}
	if _, ok := c.repo.commits[sha]; !ok {
		if c.repo.trees[sha] == nil && c.repo.blobs[sha] == nil || strings.HasPrefix(ref, "refs/heads/") {
			c.violatef("create ref %s: object %q does not exist (or is not a commit)", ref, sha)
			return c.fail(http.StatusUnprocessableEntity, "Object does not exist")
		}
	}
	if conflict := c.repo.refConflict(ref); conflict != "" {
		c.violatef("create ref %s: conflicts with existing %s (Git cannot have both)", ref, conflict)
		return c.fail(http.StatusUnprocessableEntity, "Reference update failed")
	}
	c.repo.refs[ref] = sha
	return response{status: http.StatusCreated, body: s.refJSON(c.repo, ref, sha)}
}

// handleUpdateRef serves PATCH /repos/{owner}/{repo}/git/refs/{ref}.
func (s *Server) handleUpdateRef(c *call) response {
	if s.cfg.forbidRefUpdates {
		c.violatef("PATCH git/refs/%s: moving an existing ref is forbidden in this test (ForbidRefUpdates)", c.r.PathValue("ref"))
	}
	name := strings.TrimPrefix(c.r.PathValue("ref"), "refs/")
	ref := "refs/" + name
	old, ok := c.repo.refs[ref]
	if !ok {
		c.violatef("PATCH %s: reference does not exist", ref)
		return c.fail(http.StatusUnprocessableEntity, "Reference does not exist")
	}
	sha := str(c.json, "sha")
	if _, ok := c.repo.commits[sha]; !ok {
		c.violatef("PATCH %s: object %q does not exist", ref, sha)
		return c.fail(http.StatusUnprocessableEntity, "Object does not exist")
	}
	force, _ := c.json["force"].(bool)
	if !force && !c.repo.isAncestor(old, sha) {
		c.violatef("PATCH %s: %s is not a descendant of %s", ref, sha, old)
		return c.fail(http.StatusUnprocessableEntity, "Update is not a fast forward")
	}
	c.repo.refs[ref] = sha
	return response{status: http.StatusOK, body: s.refJSON(c.repo, ref, sha)}
}

// ---- commits and trees ----

func (s *Server) commitJSON(r *repo, cm *commitObj) map[string]any {
	parents := make([]any, 0, len(cm.parents))
	for _, p := range cm.parents {
		parents = append(parents, map[string]any{
			"sha": p, "url": s.apiURL("repos/%s/git/commits/%s", r.fullName(), p), "html_url": s.htmlURL("%s/commit/%s", r.fullName(), p),
		})
	}
	who := func(p person) map[string]any {
		return map[string]any{"name": p.name, "email": p.email, "date": ts(p.date)}
	}
	return map[string]any{
		"sha": cm.sha, "node_id": nodeID("C", int64(len(r.commitOrder))),
		"url": s.apiURL("repos/%s/git/commits/%s", r.fullName(), cm.sha), "html_url": s.htmlURL("%s/commit/%s", r.fullName(), cm.sha),
		"author": who(cm.author), "committer": who(cm.committer), "message": cm.message,
		"tree":         map[string]any{"sha": cm.tree, "url": s.apiURL("repos/%s/git/trees/%s", r.fullName(), cm.tree)},
		"parents":      parents,
		"verification": map[string]any{"verified": false, "reason": "unsigned", "signature": nil, "payload": nil, "verified_at": nil},
	}
}

// handleGetCommit serves GET /repos/{owner}/{repo}/git/commits/{commit_sha}.
func (s *Server) handleGetCommit(c *call) response {
	cm := c.repo.commits[c.r.PathValue("commit_sha")]
	if cm == nil {
		return c.notFound()
	}
	return response{status: http.StatusOK, body: s.commitJSON(c.repo, cm)}
}

// handleCreateCommit serves POST /repos/{owner}/{repo}/git/commits.
func (s *Server) handleCreateCommit(c *call) response {
	tree := str(c.json, "tree")
	if c.repo.trees[tree] == nil {
		c.violatef("create commit: tree %q does not exist in %s", tree, c.repo.fullName())
		return c.fail(http.StatusUnprocessableEntity, "Tree SHA does not exist")
	}
	var parents []string
	if ps, ok := c.json["parents"].([]any); ok {
		for _, p := range ps {
			sha, _ := p.(string)
			if c.repo.commits[sha] == nil {
				c.violatef("create commit: parent %q does not exist in %s", sha, c.repo.fullName())
				return c.fail(http.StatusUnprocessableEntity, "Parent SHA does not exist or is not a commit object")
			}
			parents = append(parents, sha)
		}
	}
	bot := person{name: s.botName(), email: s.botEmail(), date: c.now.UTC().Truncate(time.Second)}
	author := bot
	if a, ok := c.json["author"].(map[string]any); ok {
		author = person{name: str(a, "name"), email: str(a, "email"), date: bot.date}
		if d := str(a, "date"); d != "" {
			author.date, _ = time.Parse(time.RFC3339, d)
		}
	}
	committer := author
	if cm, ok := c.json["committer"].(map[string]any); ok {
		committer = person{name: str(cm, "name"), email: str(cm, "email"), date: bot.date}
		if committer.name == "" || committer.email == "" {
			c.violatef("create commit: committer needs name and email")
			return c.validationFailed(fieldError{Resource: "Commit", Field: "committer", Code: "invalid"})
		}
		if d := str(cm, "date"); d != "" {
			committer.date, _ = time.Parse(time.RFC3339, d)
		}
	}
	cm := &commitObj{message: str(c.json, "message"), tree: tree, parents: parents, author: author, committer: committer, viaAPI: true}
	c.repo.putCommit(cm)
	return response{status: http.StatusCreated, body: s.commitJSON(c.repo, c.repo.commits[cm.sha])}
}

// handleGetTree serves GET /repos/{owner}/{repo}/git/trees/{tree_sha}; the
// tree may be named by its SHA, a commit SHA or a branch name.
func (s *Server) handleGetTree(c *call) response {
	id := c.r.PathValue("tree_sha")
	t := c.repo.trees[id]
	if t == nil {
		if cm := c.repo.commits[id]; cm != nil {
			t = c.repo.trees[cm.tree]
		} else if sha, ok := c.repo.refs["refs/heads/"+id]; ok {
			t = c.repo.trees[c.repo.commits[sha].tree]
		}
	}
	if t == nil {
		return c.notFound()
	}
	entries := make([]any, 0, len(t.entries))
	for _, e := range t.entries {
		m := map[string]any{"path": e.path, "mode": e.mode, "type": e.typ, "sha": e.sha,
			"url": s.apiURL("repos/%s/git/%ss/%s", c.repo.fullName(), e.typ, e.sha)}
		if e.typ == "blob" {
			m["size"] = e.size
		}
		entries = append(entries, m)
	}
	return response{status: http.StatusOK, body: map[string]any{
		"sha": t.sha, "url": s.apiURL("repos/%s/git/trees/%s", c.repo.fullName(), t.sha), "tree": entries, "truncated": false,
	}}
}
