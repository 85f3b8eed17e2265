package githubtest

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// Request is one request the fake received, as recorded after it was
// answered.
type Request struct {
	Time   time.Time
	Kind   Kind
	Method string
	// Path is the escaped URL path, Query the raw query.
	Path, Query string
	Body        []byte
	Status      int
	// Response is the JSON body answered (nil when none).
	Response []byte
	// InstallationID is the installation whose token authenticated the
	// request (0 for App JWT and unauthenticated requests).
	InstallationID int64
	// Fault names the injected fault that answered the request ("" when
	// none): "status_502", "secondary_rate_limit", "primary_rate_limit",
	// "lost_502" (the request took effect, the response was replaced).
	Fault string
}

// Violation is a request GitHub would reject that the client should not
// have sent (see the package documentation for what is not a violation).
type Violation struct {
	Method, Path string
	Kind         Kind
	Status       int
	Message      string
}

// Ref is a Git reference and the commit it points to.
type Ref struct {
	Name string // "refs/heads/main"
	SHA  string
}

// Commit is a commit of a repository.
type Commit struct {
	SHA, Message, Tree string
	Parents            []string
	AuthorName         string
	AuthorEmail        string
	// ViaAPI is true for commits created through POST git/commits.
	ViaAPI bool
}

// PullRequest is a pull request as the fake holds it.
type PullRequest struct {
	Number      int
	Title, Body string
	Head, Base  string // branch names
	HeadSHA     string
	Draft       bool
	State       string // "open" or "closed"
	// ByApp is true when the App opened it (false for AddPullRequest).
	ByApp   bool
	HTMLURL string
}

// CheckRun is a check run with everything written to it.
type CheckRun struct {
	ID                        int64
	Repo                      string // "owner/name"
	Name, HeadSHA, ExternalID string
	DetailsURL                string
	Status, Conclusion        string
	StartedAt, CompletedAt    time.Time
	Title, Summary, Text      string
	Annotations               []Annotation
	// Updates counts the successful PATCHes of the check run.
	Updates int
	HTMLURL string
	// Actions are the buttons it offers now (check run actions).
	Actions []Action
	// Writes are its successful create and updates, in order, each with
	// what the check run showed after it.
	Writes []CheckRunWrite
}

// Action is a check run action: a button GitHub shows on the check run,
// whose press sends check_run requested_action with its identifier.
type Action struct {
	Label, Description, Identifier string
}

// CheckRunWrite is one successful create or update of a check run and
// what the check run showed after it.
type CheckRunWrite struct {
	Time                 time.Time
	Status, Conclusion   string
	Title, Summary, Text string
	SetsText             bool // the write carried output.text
	Actions              []Action
	SetsActions          bool // the write carried actions
}

// Annotation is a check run annotation, in the order it was written.
type Annotation struct {
	Path                   string
	StartLine, EndLine     int
	StartColumn, EndColumn int
	Level                  string // notice, warning, failure
	Message, Title         string
	RawDetails             string
}

// Requests returns every request received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Count returns how many requests of kind were received (whatever their
// answer, faults included). Count(KindUpdateRef) == 0 asserts no ref was
// ever moved.
func (s *Server) Count(kind Kind) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kind == AnyKind {
		n := 0
		for _, c := range s.counts {
			n += c
		}
		return n
	}
	return s.counts[kind]
}

// Succeeded returns how many requests of kind were answered 2xx (a lost
// response counts as failed, though it took effect).
func (s *Server) Succeeded(kind Kind) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if (kind == AnyKind || r.Kind == kind) && r.Status >= 200 && r.Status < 300 {
			n++
		}
	}
	return n
}

// Violations returns the violations seen so far.
func (s *Server) Violations() []Violation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.violations)
}

// Refs returns the refs of repo ("owner/name"), sorted by name.
func (s *Server) Refs(repoName string) []Ref {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.mustRepo(repoName)
	if r == nil {
		return nil
	}
	out := make([]Ref, 0, len(r.refs))
	for _, name := range sortedKeys(r.refs) {
		out = append(out, Ref{Name: name, SHA: r.refs[name]})
	}
	return out
}

// Branches returns the branch names of repo, sorted.
func (s *Server) Branches(repoName string) []string {
	var out []string
	for _, ref := range s.Refs(repoName) {
		if b, ok := strings.CutPrefix(ref.Name, "refs/heads/"); ok {
			out = append(out, b)
		}
	}
	return out
}

// Branch returns the head SHA of branch in repo and whether it exists.
func (s *Server) Branch(repoName, branch string) (string, bool) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.mustRepo(repoName)
	if r == nil {
		return "", false
	}
	sha, ok := r.refs["refs/heads/"+branch]
	return sha, ok
}

func commitSnapshot(c *commitObj) Commit {
	return Commit{SHA: c.sha, Message: c.message, Tree: c.tree, Parents: slices.Clone(c.parents),
		AuthorName: c.author.name, AuthorEmail: c.author.email, ViaAPI: c.viaAPI}
}

// Commits returns the commits of repo in creation order (identical commits,
// which have one SHA, appear once).
func (s *Server) Commits(repoName string) []Commit {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.mustRepo(repoName)
	if r == nil {
		return nil
	}
	out := make([]Commit, 0, len(r.commitOrder))
	for _, sha := range r.commitOrder {
		out = append(out, commitSnapshot(r.commits[sha]))
	}
	return out
}

// Commit returns commit sha of repo and whether it exists.
func (s *Server) Commit(repoName, sha string) (Commit, bool) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.mustRepo(repoName)
	if r == nil || r.commits[sha] == nil {
		return Commit{}, false
	}
	return commitSnapshot(r.commits[sha]), true
}

func (s *Server) pullSnapshot(r *repo, p *pull) PullRequest {
	return PullRequest{
		Number: p.number, Title: p.title, Body: p.body, Head: p.head, Base: p.base, HeadSHA: r.liveHead(p),
		Draft: p.draft, State: p.state, ByApp: p.byApp, HTMLURL: s.htmlURL("%s/pull/%d", r.fullName(), p.number),
	}
}

// PullRequests returns the pull requests of repo by number.
func (s *Server) PullRequests(repoName string) []PullRequest {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.mustRepo(repoName)
	if r == nil {
		return nil
	}
	out := make([]PullRequest, 0, len(r.pulls))
	for _, p := range r.pulls {
		out = append(out, s.pullSnapshot(r, p))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}

func (s *Server) checkRunSnapshot(cr *checkRun) CheckRun {
	return CheckRun{
		ID: cr.id, Repo: cr.repo.fullName(), Name: cr.name, HeadSHA: cr.headSHA, ExternalID: cr.externalID,
		DetailsURL: cr.detailsURL, Status: cr.status, Conclusion: cr.conclusion,
		StartedAt: cr.startedAt, CompletedAt: cr.completedAt, Title: cr.title, Summary: cr.summary, Text: cr.text,
		Annotations: slices.Clone(cr.annotations), Updates: cr.updates,
		HTMLURL: s.htmlURL("%s/runs/%d", cr.repo.fullName(), cr.id),
		Actions: slices.Clone(cr.actions), Writes: slices.Clone(cr.writes),
	}
}

// CheckRuns returns the check runs of repo ("" for every repository) in
// creation order.
func (s *Server) CheckRuns(repoName string) []CheckRun {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var r *repo
	if repoName != "" {
		if r = s.mustRepo(repoName); r == nil {
			return nil
		}
	}
	out := []CheckRun{}
	for _, cr := range s.checkRuns {
		if r == nil || cr.repo == r {
			out = append(out, s.checkRunSnapshot(cr))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// CheckRun returns check run id and whether it exists.
func (s *Server) CheckRun(id int64) (CheckRun, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cr := s.checkRuns[id]
	if cr == nil {
		return CheckRun{}, false
	}
	return s.checkRunSnapshot(cr), true
}

// Wait polls cond (which may call the Server's inspection methods) every
// few milliseconds until it returns true or timeout passes; it reports
// whether cond became true.
func (s *Server) Wait(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
