package githubtest_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/gitlease/gitlease/app/githubtest"
)

func TestAppJWTAndInstallationTokens(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, false)
	ctx := context.Background()

	ac, _ := appClient(t, s, s.AppID, s.PrivateKeyPEM)
	a, _, err := ac.Apps.Get(ctx, "")
	if err != nil {
		t.Fatalf("GET /app: %v", err)
	}
	if a.GetID() != s.AppID || a.GetSlug() != s.Slug || a.GetOwner().GetLogin() == "" {
		t.Errorf("GET /app = id %d slug %q owner %q", a.GetID(), a.GetSlug(), a.GetOwner().GetLogin())
	}

	tok, resp, err := ac.Apps.CreateInstallationToken(ctx, instID, nil)
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	if resp.StatusCode != http.StatusCreated || !strings.HasPrefix(tok.GetToken(), "ghs_") {
		t.Errorf("token status %d token %q", resp.StatusCode, tok.GetToken())
	}
	if d := time.Until(tok.GetExpiresAt().Time); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("expires_at in %v, want about 1h", d)
	}
	if tok.GetPermissions().GetChecks() != "write" {
		t.Errorf("permissions = %+v", tok.GetPermissions())
	}

	// A token through ghinstallation works on repository endpoints, with
	// rate-limit headers.
	ic, itr := installationClient(t, s, instID)
	r, resp, err := ic.Repositories.Get(ctx, owner, name)
	if err != nil {
		t.Fatalf("get repo: %v", err)
	}
	if r.GetID() != 9001 || r.GetDefaultBranch() != "main" || r.GetFullName() != full {
		t.Errorf("repo = %d %q %q", r.GetID(), r.GetDefaultBranch(), r.GetFullName())
	}
	if resp.Rate.Limit != 5000 || resp.Rate.Remaining != 4999 || resp.Rate.Reset.Before(time.Now()) {
		t.Errorf("rate = %+v", resp.Rate)
	}
	if resp.Header.Get("X-RateLimit-Used") != "1" || resp.Header.Get("X-RateLimit-Resource") != "core" {
		t.Errorf("rate headers = %v", resp.Header)
	}
	itok, err := itr.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	toks := s.Tokens()
	if len(toks) != 2 || toks[1].Token != itok || toks[1].InstallationID != instID {
		t.Errorf("Tokens() = %+v, want the ghinstallation token second", toks)
	}
	if got := s.Requests(); got[len(got)-1].InstallationID != instID {
		t.Errorf("last request installation = %d", got[len(got)-1].InstallationID)
	}
}

func TestBadJWTIs401(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, false, githubtest.Lenient())
	ctx := context.Background()

	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	otherPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)})
	ac, _ := appClient(t, s, s.AppID, otherPEM)
	_, _, err := ac.Apps.Get(ctx, "")
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != 401 || er.Message != "A JSON web token could not be decoded" || er.DocumentationURL == "" {
		t.Fatalf("JWT signed by another key: err = %v", err)
	}

	n := now()
	cases := map[string]struct {
		claims string
		want   string
	}{
		"expired":           {jwtClaims(strconv.FormatInt(s.AppID, 10), n-700, n-100), "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"},
		"too long":          {jwtClaims(s.AppID, n-10, n+595), "'Expiration time' claim ('exp') is too far in the future"},
		"fractional iat":    {fmt.Sprintf(`{"iss":"%d","iat":%d.5,"exp":%d}`, s.AppID, n-30, n+90), "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"},
		"unknown issuer":    {jwtClaims("999", n-30, n+90), "Integration not found"},
		"iat in future":     {jwtClaims(s.AppID, n+300, n+500), "'Issued at' claim ('iat') must be an Integer representing a time in the past"},
		"missing exp":       {fmt.Sprintf(`{"iss":%d,"iat":%d}`, s.AppID, n-30), "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"},
		"numeric issuer ok": {jwtClaims(s.AppID, n-30, n+540), ""},
	}
	for label, tc := range cases {
		res, body := rawRequest(t, s, "GET", "/app", "Bearer "+signJWT(t, s.PrivateKey, tc.claims), nil)
		if tc.want == "" {
			if res.StatusCode != 200 {
				t.Errorf("%s: status %d %v", label, res.StatusCode, body)
			}
			continue
		}
		if res.StatusCode != 401 || body["message"] != tc.want {
			t.Errorf("%s: got %d %v, want 401 %q", label, res.StatusCode, body["message"], tc.want)
		}
	}
	// A JWT cannot be used on repository endpoints, nor a token on /app.
	jwt := signJWT(t, s.PrivateKey, jwtClaims(s.AppID, n-30, n+90))
	if res, _ := rawRequest(t, s, "GET", "/repos/"+full, "Bearer "+jwt, nil); res.StatusCode != 401 {
		t.Errorf("JWT on repo endpoint: %d", res.StatusCode)
	}
	// Unauthenticated on a private repository is a 404.
	if res, _ := rawRequest(t, s, "GET", "/repos/"+full, "", nil); res.StatusCode != 404 {
		t.Errorf("no auth on repo endpoint: %d", res.StatusCode)
	}
	// Unknown installation.
	if res, _ := rawRequest(t, s, "POST", "/app/installations/5/access_tokens", "Bearer "+jwt, nil); res.StatusCode != 404 {
		t.Errorf("unknown installation: %d", res.StatusCode)
	}
	if len(s.Violations()) < len(cases) {
		t.Errorf("violations = %d, want every rejection recorded", len(s.Violations()))
	}
}

func TestTokenScopeAndPermissions(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, false, githubtest.Lenient())
	s.AddRepo(owner, "other", 9002, "main", true)
	s.AddRepo("someone", "elsewhere", 9003, "main", true)
	s.AddInstallation(78, "someone/elsewhere")
	ctx := context.Background()
	ic, _ := installationClient(t, s, instID)
	// Installation 77 does not include octo-org/other: 404 like GitHub.
	if _, _, err := ic.Repositories.Get(ctx, owner, "other"); errorStatus(err) != 404 {
		t.Errorf("repo outside installation: %v", err)
	}
	// Narrow permissions: checks read only.
	s.SetInstallationPermissions(78, map[string]string{"checks": "read", "contents": "read"})
	ic2, _ := installationClient(t, s, 78)
	_, _, err := ic2.Checks.CreateCheckRun(ctx, "someone", "elsewhere", github.CreateCheckRunOptions{Name: "x", HeadSHA: strings.Repeat("0", 40)})
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != 403 || er.Message != "Resource not accessible by integration" {
		t.Errorf("write without permission: %v", err)
	}
	// A token request for a repository outside the installation is a 422.
	ac, _ := appClient(t, s, s.AppID, s.PrivateKeyPEM)
	_, _, err = ac.Apps.CreateInstallationToken(ctx, instID, &github.InstallationTokenOptions{Repositories: []string{"other"}})
	if errorStatus(err) != 422 {
		t.Errorf("token for foreign repo: %v", err)
	}
	tok, _, err := ac.Apps.CreateInstallationToken(ctx, instID, &github.InstallationTokenOptions{Repositories: []string{name}})
	if err != nil || len(tok.Repositories) != 1 {
		t.Errorf("scoped token: %v %+v", err, tok)
	}
	// Revoked tokens are 401.
	s.RevokeTokens()
	if res, _ := rawRequest(t, s, "GET", "/repos/"+full, "token "+tok.GetToken(), nil); res.StatusCode != 401 {
		t.Errorf("revoked token: %d", res.StatusCode)
	}
}

func TestRefs(t *testing.T) {
	t.Parallel()
	s, info := setup(t, false)
	ctx := context.Background()
	c, _ := installationClient(t, s, instID)

	ref, _, err := c.Git.GetRef(ctx, owner, name, "heads/main")
	if err != nil || ref.GetObject().GetSHA() != info.HeadSHA || ref.GetRef() != "refs/heads/main" {
		t.Fatalf("get main: %v %+v", err, ref)
	}
	// A missing ref is a plain 404, not a violation (strict server).
	if _, _, err := c.Git.GetRef(ctx, owner, name, "heads/gitlease/1"); errorStatus(err) != 404 {
		t.Fatalf("missing ref: %v", err)
	}
	created, resp, err := c.Git.CreateRef(ctx, owner, name, &github.Reference{
		Ref: github.String("refs/heads/gitlease/1"), Object: &github.GitObject{SHA: github.String(info.HeadSHA)},
	})
	if err != nil || resp.StatusCode != 201 || created.GetObject().GetSHA() != info.HeadSHA {
		t.Fatalf("create ref: %v", err)
	}
	// Creating it again is 422 "Reference already exists", not a violation.
	_, _, err = c.Git.CreateRef(ctx, owner, name, &github.Reference{
		Ref: github.String("refs/heads/gitlease/1"), Object: &github.GitObject{SHA: github.String(info.HeadSHA)},
	})
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != 422 || er.Message != "Reference already exists" {
		t.Fatalf("create existing ref: %v", err)
	}
	if got := s.Branches(full); strings.Join(got, ",") != "gitlease/1,main" {
		t.Errorf("branches = %v", got)
	}
	if sha, ok := s.Branch(full, "gitlease/1"); !ok || sha != info.HeadSHA {
		t.Errorf("Branch = %q %v", sha, ok)
	}
	if s.Count(githubtest.KindUpdateRef) != 0 || s.Count(githubtest.KindCreateRef) != 2 {
		t.Errorf("counts: update %d create %d", s.Count(githubtest.KindUpdateRef), s.Count(githubtest.KindCreateRef))
	}
	if v := s.Violations(); len(v) != 0 {
		t.Errorf("violations: %+v", v)
	}
}

func TestRefViolations(t *testing.T) {
	t.Parallel()
	s, info := setup(t, false, githubtest.Lenient(), githubtest.ForbidRefUpdates())
	ctx := context.Background()
	c, _ := installationClient(t, s, instID)
	for _, tc := range []struct{ ref, sha, msg string }{
		{"refs/heads/x", strings.Repeat("a", 40), "Object does not exist"},
		{"refs/x", info.HeadSHA, "Reference name must start with 'refs/' and contain at least three slash-separated components."},
		{"refs/heads/bad..name", info.HeadSHA, "refs/heads/bad..name is not a valid ref name."},
		{"refs/heads/main/sub", info.HeadSHA, "Reference update failed"},
	} {
		_, _, err := c.Git.CreateRef(ctx, owner, name, &github.Reference{Ref: github.String(tc.ref), Object: &github.GitObject{SHA: github.String(tc.sha)}})
		var er *github.ErrorResponse
		if !errors.As(err, &er) || er.Response.StatusCode != 422 || er.Message != tc.msg {
			t.Errorf("create %s: %v, want 422 %q", tc.ref, err, tc.msg)
		}
	}
	// Missing required sha (schema from GitHub's OpenAPI description).
	res, body := rawRequest(t, s, "POST", "/repos/"+full+"/git/refs", "token "+s.Tokens()[0].Token, map[string]any{"ref": "refs/heads/y"})
	if res.StatusCode != 422 || !strings.Contains(body["message"].(string), `"sha" wasn't supplied.`) {
		t.Errorf("missing sha: %d %v", res.StatusCode, body)
	}
	// PATCH is counted and, with ForbidRefUpdates, a violation even when valid.
	sha := s.Push(full, "feature", "work")
	_, _, err := c.Git.UpdateRef(ctx, owner, name, &github.Reference{Ref: github.String("refs/heads/main"), Object: &github.GitObject{SHA: github.String(sha)}}, false)
	if err != nil {
		t.Fatalf("fast-forward update: %v", err)
	}
	_, _, err = c.Git.UpdateRef(ctx, owner, name, &github.Reference{Ref: github.String("refs/heads/feature"), Object: &github.GitObject{SHA: github.String(info.HeadSHA)}}, false)
	if errorStatus(err) != 422 {
		t.Errorf("non fast-forward update: %v", err)
	}
	if s.Count(githubtest.KindUpdateRef) != 2 {
		t.Errorf("update count = %d", s.Count(githubtest.KindUpdateRef))
	}
	var forbidden int
	for _, v := range s.Violations() {
		if strings.Contains(v.Message, "ForbidRefUpdates") {
			forbidden++
		}
	}
	if forbidden != 2 {
		t.Errorf("ForbidRefUpdates violations = %d, want 2: %+v", forbidden, s.Violations())
	}
}

func TestCommitsAndTrees(t *testing.T) {
	t.Parallel()
	s, info := setup(t, false)
	ctx := context.Background()
	c, _ := installationClient(t, s, instID)

	base, _, err := c.Git.GetCommit(ctx, owner, name, info.HeadSHA)
	if err != nil || base.GetTree().GetSHA() != info.TreeSHA || base.GetMessage() != "Initial commit" {
		t.Fatalf("get commit: %v %+v", err, base)
	}
	tree, _, err := c.Git.GetTree(ctx, owner, name, base.GetTree().GetSHA(), false)
	if err != nil || len(tree.Entries) != 1 || tree.Entries[0].GetPath() != "README.md" {
		t.Fatalf("get tree: %v %+v", err, tree)
	}
	cm, resp, err := c.Git.CreateCommit(ctx, owner, name, &github.Commit{
		Message: github.String("empty"), Tree: base.Tree, Parents: []*github.Commit{{SHA: base.SHA}},
	}, nil)
	if err != nil || resp.StatusCode != 201 || len(cm.GetSHA()) != 40 || cm.Parents[0].GetSHA() != info.HeadSHA {
		t.Fatalf("create commit: %v %+v", err, cm)
	}
	if !strings.HasSuffix(cm.GetAuthor().GetName(), "[bot]") {
		t.Errorf("author = %q, want the App's bot", cm.GetAuthor().GetName())
	}
	got, ok := s.Commit(full, cm.GetSHA())
	if !ok || !got.ViaAPI || got.Tree != info.TreeSHA || len(s.Commits(full)) != 2 {
		t.Errorf("Commit = %+v %v; commits %d", got, ok, len(s.Commits(full)))
	}
	if _, _, err := c.Git.GetCommit(ctx, owner, name, strings.Repeat("b", 40)); errorStatus(err) != 404 {
		t.Errorf("missing commit: %v", err)
	}
}

func TestCommitViolations(t *testing.T) {
	t.Parallel()
	s, info := setup(t, false, githubtest.Lenient())
	ctx := context.Background()
	c, _ := installationClient(t, s, instID)
	_, _, err := c.Git.CreateCommit(ctx, owner, name, &github.Commit{Message: github.String("x"), Tree: &github.Tree{SHA: github.String(strings.Repeat("c", 40))}}, nil)
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Message != "Tree SHA does not exist" {
		t.Errorf("unknown tree: %v", err)
	}
	_, _, err = c.Git.CreateCommit(ctx, owner, name, &github.Commit{Tree: &github.Tree{SHA: github.String(info.TreeSHA)}}, nil)
	if !errors.As(err, &er) || er.Response.StatusCode != 422 || !strings.Contains(er.Message, `"message" wasn't supplied`) {
		t.Errorf("missing message: %v", err)
	}
	if len(s.Violations()) != 2 {
		t.Errorf("violations = %+v", s.Violations())
	}
}

func TestPullRequests(t *testing.T) {
	t.Parallel()
	s, info := setup(t, true) // no drafts
	ctx := context.Background()
	c, _ := installationClient(t, s, instID)
	head := newBranch(t, ctx, c, info, "gitlease/7")
	body := "Closes #7\n\n<!-- gitlease {\"qualified_id\":\"x\",\"generation\":1,\"entry_id\":\"e\"} -->"

	// Draft on a repository without drafts: 422 with GitHub's error, no violation.
	_, _, err := c.PullRequests.Create(ctx, owner, name, &github.NewPullRequest{
		Title: github.String("Fix it"), Head: github.String("gitlease/7"), Base: github.String("main"), Body: github.String(body), Draft: github.Bool(true),
	})
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != 422 || er.Message != "Validation Failed" || len(er.Errors) != 1 ||
		er.Errors[0].Message != "Draft pull requests are not supported in this repository." || er.Errors[0].Code != "custom" || er.Errors[0].Resource != "PullRequest" {
		t.Fatalf("draft unsupported: %v", err)
	}
	pr, resp, err := c.PullRequests.Create(ctx, owner, name, &github.NewPullRequest{
		Title: github.String("Fix it"), Head: github.String("gitlease/7"), Base: github.String("main"), Body: github.String(body),
	})
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create pull: %v", err)
	}
	if pr.GetNumber() != 1 || pr.GetHead().GetSHA() != head || pr.GetHead().GetRef() != "gitlease/7" || pr.GetBase().GetRef() != "main" ||
		pr.GetHead().GetRepo().GetID() != 9001 || pr.GetBase().GetRepo().GetFullName() != full || pr.GetDraft() || pr.GetState() != "open" ||
		pr.GetHTMLURL() != "https://github.com/"+full+"/pull/1" || pr.GetBody() != body {
		t.Errorf("pull = %+v", pr)
	}
	// Duplicate: 422 "A pull request already exists for owner:head.", no violation.
	_, _, err = c.PullRequests.Create(ctx, owner, name, &github.NewPullRequest{
		Title: github.String("Fix it"), Head: github.String(owner + ":gitlease/7"), Base: github.String("main"),
	})
	if !errors.As(err, &er) || er.Response.StatusCode != 422 || len(er.Errors) != 1 || er.Errors[0].Message != "A pull request already exists for octo-org:gitlease/7." {
		t.Fatalf("duplicate: %v", err)
	}
	// List by head finds it; another head does not.
	list, _, err := c.PullRequests.List(ctx, owner, name, &github.PullRequestListOptions{Head: owner + ":gitlease/7", Base: "main", State: "all"})
	if err != nil || len(list) != 1 || list[0].GetNumber() != 1 {
		t.Fatalf("list by head: %v %d", err, len(list))
	}
	list, _, err = c.PullRequests.List(ctx, owner, name, &github.PullRequestListOptions{Head: owner + ":gitlease/8"})
	if err != nil || len(list) != 0 {
		t.Fatalf("list other head: %v %d", err, len(list))
	}
	got, _, err := c.PullRequests.Get(ctx, owner, name, 1)
	if err != nil || got.GetTitle() != "Fix it" {
		t.Fatalf("get pull: %v", err)
	}
	if _, _, err := c.PullRequests.Get(ctx, owner, name, 99); errorStatus(err) != 404 {
		t.Errorf("missing pull: %v", err)
	}
	// The head SHA follows the branch.
	moved := s.Push(full, "gitlease/7", "worker pushed")
	got, _, _ = c.PullRequests.Get(ctx, owner, name, 1)
	if got.GetHead().GetSHA() != moved {
		t.Errorf("head sha = %s, want %s", got.GetHead().GetSHA(), moved)
	}
	prs := s.PullRequests(full)
	if len(prs) != 1 || prs[0].Draft || prs[0].Body != body || !prs[0].ByApp || prs[0].HeadSHA != moved {
		t.Errorf("PullRequests = %+v", prs)
	}
	if v := s.Violations(); len(v) != 0 {
		t.Errorf("violations: %+v", v)
	}
}

func TestPullRequestViolations(t *testing.T) {
	t.Parallel()
	s, info := setup(t, false, githubtest.Lenient())
	ctx := context.Background()
	c, _ := installationClient(t, s, instID)
	s.ReserveNumbers(full, 10)
	newBranch(t, ctx, c, info, "b")
	_ = s.Push(full, "same", "x")
	// "same" has a commit, but base==head and an unknown branch are errors.
	for _, tc := range []struct {
		head, base, title string
		want              string
	}{
		{"main", "main", "t", "No commits between main and main"},
		{"nope", "main", "t", "head"},
		{"b", "nope", "t", "base"},
		{"b", "main", "", "title"},
	} {
		_, _, err := c.PullRequests.Create(ctx, owner, name, &github.NewPullRequest{Title: github.String(tc.title), Head: github.String(tc.head), Base: github.String(tc.base)})
		var er *github.ErrorResponse
		if !errors.As(err, &er) || er.Response.StatusCode != 422 || len(er.Errors) != 1 || (er.Errors[0].Message != tc.want && er.Errors[0].Field != tc.want) {
			t.Errorf("create %s->%s: %v %+v", tc.head, tc.base, err, er)
		}
	}
	// No commits between: a branch at the base's head.
	_, _, _ = c.Git.CreateRef(ctx, owner, name, &github.Reference{Ref: github.String("refs/heads/empty"), Object: &github.GitObject{SHA: github.String(info.HeadSHA)}})
	_, _, err := c.PullRequests.Create(ctx, owner, name, &github.NewPullRequest{Title: github.String("t"), Head: github.String("empty"), Base: github.String("main")})
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Errors[0].Message != "No commits between main and empty" {
		t.Errorf("empty branch: %v", err)
	}
	// head without owner: GitHub ignores the filter; the fake flags it.
	n := len(s.Violations())
	list, _, err := c.PullRequests.List(ctx, owner, name, &github.PullRequestListOptions{Head: "b"})
	if err != nil || len(s.Violations()) != n+1 {
		t.Errorf("head without owner: %v, violations %d -> %d", err, n, len(s.Violations()))
	}
	_ = list
	// Bad state enum is a 422 from the OpenAPI query schema.
	if _, _, err := c.PullRequests.List(ctx, owner, name, &github.PullRequestListOptions{State: "merged"}); errorStatus(err) != 422 {
		t.Errorf("bad state: %v", err)
	}
	// Numbers continue after reserved issue numbers.
	pr, _, err := c.PullRequests.Create(ctx, owner, name, &github.NewPullRequest{Title: github.String("t"), Head: github.String("b"), Base: github.String("main")})
	if err != nil || pr.GetNumber() != 11 {
		t.Errorf("number after ReserveNumbers: %v %d", err, pr.GetNumber())
	}
}

func annotation(i int, raw string) *github.CheckRunAnnotation {
	return &github.CheckRunAnnotation{
		Path: github.String(".github"), StartLine: github.Int(1), EndLine: github.Int(1),
		AnnotationLevel: github.String("notice"), Title: github.String(fmt.Sprintf("replay %d", i)),
		Message: github.String("Delivery d replayed generation 1"), RawDetails: github.String(raw),
	}
}

func TestCheckRuns(t *testing.T) {
	t.Parallel()
	s, info := setup(t, false)
	ctx := context.Background()
	c, _ := installationClient(t, s, instID)

	cr, resp, err := c.Checks.CreateCheckRun(ctx, owner, name, github.CreateCheckRunOptions{
		Name: "gitlease", HeadSHA: info.HeadSHA, ExternalID: github.String("entry-1"), Status: github.String("queued"),
		Output: &github.CheckRunOutput{Title: github.String("Queued"), Summary: github.String("Waiting for a worker.")},
	})
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create check run: %v", err)
	}
	if cr.GetID() == 0 || cr.GetStatus() != "queued" || cr.GetExternalID() != "entry-1" || cr.GetHeadSHA() != info.HeadSHA ||
		cr.GetApp().GetID() != s.AppID || !strings.HasSuffix(cr.GetHTMLURL(), fmt.Sprintf("/runs/%d", cr.GetID())) {
		t.Errorf("check run = %+v", cr)
	}
	_, _, err = c.Checks.UpdateCheckRun(ctx, owner, name, cr.GetID(), github.UpdateCheckRunOptions{
		Status: github.String("in_progress"),
		Output: &github.CheckRunOutput{Title: github.String("Leased"), Summary: github.String("A worker took it."),
			Annotations: []*github.CheckRunAnnotation{annotation(1, `{"delivery":"d"}`), annotation(2, `{}`)}},
	})
	if err != nil {
		t.Fatalf("update in_progress: %v", err)
	}
	done, _, err := c.Checks.UpdateCheckRun(ctx, owner, name, cr.GetID(), github.UpdateCheckRunOptions{
		Status: github.String("completed"), Conclusion: github.String("success"),
		Output: &github.CheckRunOutput{Title: github.String("Done"), Summary: github.String("Completed."),
			Annotations: []*github.CheckRunAnnotation{annotation(3, `{}`)}},
	})
	if err != nil || done.GetConclusion() != "success" || done.GetCompletedAt().IsZero() || done.GetOutput().GetAnnotationsCount() != 3 {
		t.Fatalf("complete: %v %+v", err, done)
	}
	got, ok := s.CheckRun(cr.GetID())
	if !ok || got.Status != "completed" || got.Conclusion != "success" || got.ExternalID != "entry-1" || got.Summary != "Completed." ||
		len(got.Annotations) != 3 || got.Annotations[0].RawDetails != `{"delivery":"d"}` || got.Annotations[2].Title != "replay 3" || got.Updates != 2 {
		t.Errorf("CheckRun = %+v", got)
	}
	anns, _, err := c.Checks.ListCheckRunAnnotations(ctx, owner, name, cr.GetID(), nil)
	if err != nil || len(anns) != 3 || anns[0].GetPath() != ".github" {
		t.Errorf("annotations: %v %d", err, len(anns))
	}

	// A second run with the same name: latest filter shows one, all shows two.
	second, _, err := c.Checks.CreateCheckRun(ctx, owner, name, github.CreateCheckRunOptions{Name: "gitlease", HeadSHA: info.HeadSHA, ExternalID: github.String("entry-2")})
	if err != nil {
		t.Fatal(err)
	}
	latest, _, err := c.Checks.ListCheckRunsForRef(ctx, owner, name, info.HeadSHA, &github.ListCheckRunsOptions{CheckName: github.String("gitlease")})
	if err != nil || latest.GetTotal() != 1 || latest.CheckRuns[0].GetID() != second.GetID() {
		t.Errorf("latest: %v %+v", err, latest)
	}
	all, _, err := c.Checks.ListCheckRunsForRef(ctx, owner, name, "main", &github.ListCheckRunsOptions{CheckName: github.String("gitlease"), Filter: github.String("all")})
	if err != nil || all.GetTotal() != 2 {
		t.Errorf("all: %v %+v", err, all)
	}
	// A branch name with a slash works as {ref}.
	_, _, _ = c.Git.CreateRef(ctx, owner, name, &github.Reference{Ref: github.String("refs/heads/gitlease/3"), Object: &github.GitObject{SHA: github.String(info.HeadSHA)}})
	bySlash, _, err := c.Checks.ListCheckRunsForRef(ctx, owner, name, "gitlease/3", &github.ListCheckRunsOptions{Filter: github.String("all")})
	if err != nil || bySlash.GetTotal() != 2 {
		t.Errorf("by branch with slash: %v %+v", err, bySlash)
	}
	got2, _, err := c.Checks.GetCheckRun(ctx, owner, name, second.GetID())
	if err != nil || got2.GetExternalID() != "entry-2" {
		t.Errorf("get: %v", err)
	}
	if len(s.CheckRuns(full)) != 2 || len(s.Violations()) != 0 {
		t.Errorf("CheckRuns %d violations %+v", len(s.CheckRuns(full)), s.Violations())
	}
}

func TestCheckRunViolations(t *testing.T) {
	t.Parallel()
	s, info := setup(t, false, githubtest.Lenient())
	ctx := context.Background()
	c, _ := installationClient(t, s, instID)
	cr, _, err := c.Checks.CreateCheckRun(ctx, owner, name, github.CreateCheckRunOptions{Name: "gitlease", HeadSHA: info.HeadSHA})
	if err != nil {
		t.Fatal(err)
	}
	many := make([]*github.CheckRunAnnotation, 51)
	for i := range many {
		many[i] = annotation(i, "{}")
	}
	out := func(anns ...*github.CheckRunAnnotation) *github.CheckRunOutput {
		return &github.CheckRunOutput{Title: github.String("t"), Summary: github.String("s"), Annotations: anns}
	}
	for label, opts := range map[string]github.UpdateCheckRunOptions{
		"51 annotations":          {Output: out(many...)},
		"raw_details over 64 KB":  {Output: out(annotation(0, strings.Repeat("x", 64*1024+1)))},
		"completed no conclusion": {Status: github.String("completed")},
		"bad conclusion":          {Conclusion: github.String("passed")},
		"bad level": {Output: out(&github.CheckRunAnnotation{Path: github.String(".github"), StartLine: github.Int(1), EndLine: github.Int(1),
			AnnotationLevel: github.String("error"), Message: github.String("m")})},
		"annotation without message": {Output: out(&github.CheckRunAnnotation{Path: github.String(".github"), StartLine: github.Int(1), EndLine: github.Int(1),
			AnnotationLevel: github.String("notice")})},
		"summary too long":           {Output: &github.CheckRunOutput{Title: github.String("t"), Summary: github.String(strings.Repeat("s", 65536))}},
		"waiting status":             {Status: github.String("waiting")},
		"four actions":               {Actions: actions(4, "Cancel", "Stop it", "cancel")},
		"label of 21":                {Actions: actions(1, strings.Repeat("l", 21), "d", "cancel")},
		"description of 41":          {Actions: actions(1, "Cancel", strings.Repeat("d", 41), "cancel")},
		"identifier of 21":           {Actions: actions(1, "Cancel", "d", strings.Repeat("i", 21))},
		"action without description": {Actions: []*github.CheckRunAction{{Label: "Cancel", Identifier: "cancel"}}},
	} {
		_, _, err := c.Checks.UpdateCheckRun(ctx, owner, name, cr.GetID(), opts)
		var er *github.ErrorResponse
		if !errors.As(err, &er) || er.Response.StatusCode != 422 || !strings.HasPrefix(er.Message, "Invalid request.") {
			t.Errorf("%s: %v", label, err)
		}
	}
	if got, _ := s.CheckRun(cr.GetID()); len(got.Annotations) != 0 || got.Updates != 0 {
		t.Errorf("rejected updates changed the check run: %+v", got)
	}
	// Creation on a SHA that is not a commit of the repository.
	_, _, err = c.Checks.CreateCheckRun(ctx, owner, name, github.CreateCheckRunOptions{Name: "gitlease", HeadSHA: strings.Repeat("d", 40)})
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != 422 || !strings.HasPrefix(er.Message, "No commit found for SHA") {
		t.Errorf("unknown head_sha: %v", err)
	}
	// Completed at creation without a conclusion.
	_, _, err = c.Checks.CreateCheckRun(ctx, owner, name, github.CreateCheckRunOptions{Name: "gitlease", HeadSHA: info.HeadSHA, Status: github.String("completed")})
	if errorStatus(err) != 422 {
		t.Errorf("create completed without conclusion: %v", err)
	}
	// Update of an unknown check run.
	if _, _, err := c.Checks.UpdateCheckRun(ctx, owner, name, 1, github.UpdateCheckRunOptions{Status: github.String("in_progress")}); errorStatus(err) != 404 {
		t.Errorf("unknown check run: %v", err)
	}
	if n := len(s.Violations()); n != 16 {
		t.Errorf("violations = %d: %+v", n, s.Violations())
	}
}

func actions(n int, label, description, identifier string) []*github.CheckRunAction {
	out := make([]*github.CheckRunAction, n)
	for i := range out {
		out[i] = &github.CheckRunAction{Label: label, Description: description, Identifier: fmt.Sprint(identifier[:len(identifier)-1], i%10)}
	}
	return out
}

// TestCheckRunActions: a check run keeps the buttons it was given, three at
// most at GitHub's lengths, until an update replaces them (actions: []
// removes them); an update without actions leaves them; a press of a
// button it offers is delivered as check_run requested_action, and of one
// it does not offer is refused.
func TestCheckRunActions(t *testing.T) {
	t.Parallel()
	s, info := setup(t, false)
	ctx := context.Background()
	c, _ := installationClient(t, s, instID)
	three := actions(3, strings.Repeat("l", 20), strings.Repeat("d", 40), strings.Repeat("i", 20))
	cr, _, err := c.Checks.CreateCheckRun(ctx, owner, name, github.CreateCheckRunOptions{
		Name: "gitlease", HeadSHA: info.HeadSHA, Status: github.String("in_progress"), Actions: three,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.CheckRun(cr.GetID()); len(got.Actions) != 3 || got.Actions[2].Identifier != three[2].Identifier || !got.Writes[0].SetsActions {
		t.Fatalf("actions after create = %+v", got.Actions)
	}
	if _, _, err := c.Checks.UpdateCheckRun(ctx, owner, name, cr.GetID(), github.UpdateCheckRunOptions{
		Output: &github.CheckRunOutput{Title: github.String("t"), Summary: github.String("s"), Text: github.String("x")},
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.CheckRun(cr.GetID()); len(got.Actions) != 3 || got.Writes[1].SetsActions || !got.Writes[1].SetsText {
		t.Fatalf("an update without actions changed them: %+v", got)
	}
	got, _ := s.CheckRun(cr.GetID())
	if _, err := s.PressAction(cr.GetID(), "cancel", "octo"); err == nil {
		t.Error("a press of a button the check run does not offer was delivered")
	}
	if _, err := s.PressAction(cr.GetID(), got.Actions[0].Identifier, "octo"); err != nil {
		t.Errorf("press: %v", err)
	}
	req, err := c.NewRequest("PATCH", fmt.Sprintf("repos/%s/%s/check-runs/%d", owner, name, cr.GetID()),
		map[string]any{"status": "completed", "conclusion": "cancelled", "actions": []any{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.CheckRun(cr.GetID()); len(got.Actions) != 0 || !got.Writes[2].SetsActions || got.Conclusion != "cancelled" {
		t.Fatalf("actions: [] left %+v", got.Actions)
	}
}

func TestManifestConversion(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, false)
	ctx := context.Background()
	manifest := `{"name":"gitlease-acme","url":"https://gitlease.example","hook_attributes":{"url":"https://gitlease.example/webhook"},
		"redirect_url":"https://gitlease.example/setup/callback","public":false,
		"default_permissions":{"checks":"write","contents":"write","pull_requests":"write","issues":"read","metadata":"read"},
		"default_events":["issues","issue_comment","pull_request"]}`
	want := s.AddManifestCodeFor("abc123", []byte(manifest))
	anon := withBase(t, github.NewClient(nil), s)
	cfg, resp, err := anon.Apps.CompleteAppManifest(ctx, "abc123")
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("conversion: %v", err)
	}
	if cfg.GetID() != want.ID || cfg.GetSlug() != "gitlease-acme" || cfg.GetName() != "gitlease-acme" || cfg.GetPEM() != string(want.PEM) ||
		cfg.GetWebhookSecret() == "" || cfg.GetWebhookSecret() != want.WebhookSecret || cfg.GetClientSecret() == "" ||
		cfg.GetClientID() == "" || cfg.GetNodeID() == "" || cfg.GetOwner().GetLogin() == "" || cfg.GetHTMLURL() != want.HTMLURL {
		t.Errorf("conversion = %+v", cfg)
	}
	// A code works once; an unknown code is a 404 (neither is a violation).
	if _, _, err := anon.Apps.CompleteAppManifest(ctx, "abc123"); errorStatus(err) != 404 {
		t.Errorf("second use: %v", err)
	}
	if _, _, err := anon.Apps.CompleteAppManifest(ctx, "nope"); errorStatus(err) != 404 {
		t.Errorf("unknown code: %v", err)
	}
	// The new App's key authenticates GET /app.
	ac, _ := appClient(t, s, cfg.GetID(), []byte(cfg.GetPEM()))
	a, _, err := ac.Apps.Get(ctx, "")
	if err != nil || a.GetID() != want.ID {
		t.Errorf("new app JWT: %v", err)
	}
	if len(s.Violations()) != 0 {
		t.Errorf("violations: %+v", s.Violations())
	}
	// The manifest is checked as GitHub checks it.
	rec := &recordingTB{TB: t}
	s2 := githubtest.New(rec)
	s2.AddManifestCodeFor("x", []byte(`{"name":"n","hook_attributes":{},"default_events":["issues"],"colour":"red"}`))
	errs := strings.Join(rec.errors(), "\n")
	for _, want := range []string{"url is required", "hook_attributes.url is required", "Default events unsupported: issues", `unknown manifest key "colour"`} {
		if !strings.Contains(errs, want) {
			t.Errorf("manifest problems %q lack %q", errs, want)
		}
	}
}

func TestFaultsSurfaceInGoGitHub(t *testing.T) {
	t.Parallel()
	s, info := setup(t, false)
	ctx := context.Background()

	t.Run("5xx", func(t *testing.T) {
		c, _ := installationClient(t, s, instID)
		s.FailNext(githubtest.KindGetRepo, 3, 502)
		for i := 0; i < 3; i++ {
			_, _, err := c.Repositories.Get(ctx, owner, name)
			var er *github.ErrorResponse
			if !errors.As(err, &er) || er.Response.StatusCode != 502 {
				t.Fatalf("attempt %d: %v", i, err)
			}
		}
		if _, _, err := c.Repositories.Get(ctx, owner, name); err != nil {
			t.Fatalf("after faults: %v", err)
		}
	})

	t.Run("fault has no effect", func(t *testing.T) {
		c, _ := installationClient(t, s, instID)
		s.FailNext(githubtest.KindCreateRef, 1, 500)
		_, _, err := c.Git.CreateRef(ctx, owner, name, &github.Reference{Ref: github.String("refs/heads/f1"), Object: &github.GitObject{SHA: github.String(info.HeadSHA)}})
		if errorStatus(err) != 500 {
			t.Fatalf("want 500: %v", err)
		}
		if _, ok := s.Branch(full, "f1"); ok {
			t.Fatal("a failed request created the ref")
		}
	})

	t.Run("lost response", func(t *testing.T) {
		c, _ := installationClient(t, s, instID)
		s.LoseResponses(githubtest.KindCreateRef, 1)
		ref := &github.Reference{Ref: github.String("refs/heads/f2"), Object: &github.GitObject{SHA: github.String(info.HeadSHA)}}
		_, _, err := c.Git.CreateRef(ctx, owner, name, ref)
		if errorStatus(err) != 502 {
			t.Fatalf("want 502: %v", err)
		}
		if _, ok := s.Branch(full, "f2"); !ok {
			t.Fatal("a lost response did not apply")
		}
		_, _, err = c.Git.CreateRef(ctx, owner, name, ref)
		var er *github.ErrorResponse
		if !errors.As(err, &er) || er.Message != "Reference already exists" {
			t.Fatalf("retry: %v", err)
		}
		reqs := s.Requests()
		var lost int
		for _, r := range reqs {
			if r.Fault == "lost_502" {
				lost++
			}
		}
		if lost != 1 {
			t.Errorf("lost faults recorded = %d", lost)
		}
	})

	t.Run("secondary rate limit", func(t *testing.T) {
		c, _ := installationClient(t, s, instID)
		s.SecondaryRateLimit(githubtest.KindCreateCheckRun, 1, 7)
		_, _, err := c.Checks.CreateCheckRun(ctx, owner, name, github.CreateCheckRunOptions{Name: "gitlease", HeadSHA: info.HeadSHA})
		var ae *github.AbuseRateLimitError
		if !errors.As(err, &ae) || ae.RetryAfter == nil || *ae.RetryAfter != 7*time.Second ||
			!strings.HasPrefix(ae.Message, "You have exceeded a secondary rate limit") {
			t.Fatalf("want AbuseRateLimitError with RetryAfter 7s: %#v", err)
		}
		if len(s.CheckRuns(full)) != 0 {
			t.Fatal("a rate-limited request created a check run")
		}
		s.EndRateLimits() // the later cases stand for a client that waited 7 s
	})

	t.Run("primary rate limit", func(t *testing.T) {
		c, _ := installationClient(t, s, instID)
		s.PrimaryRateLimit(1, 30*time.Second)
		_, _, err := c.Repositories.Get(ctx, owner, name)
		var rl *github.RateLimitError
		if !errors.As(err, &rl) || rl.Rate.Remaining != 0 || time.Until(rl.Rate.Reset.Time) < 20*time.Second ||
			!strings.Contains(rl.Message, "API rate limit exceeded for installation ID 77") {
			t.Fatalf("want RateLimitError: %#v", err)
		}
		// n = 1: the next request (a new client, go-github would otherwise
		// wait for the reset itself) passes.
		s.EndRateLimits() // it stands for a client that waited for the reset
		c2, _ := installationClient(t, s, instID)
		if _, _, err := c2.Repositories.Get(ctx, owner, name); err != nil {
			t.Fatalf("after primary limit: %v", err)
		}
	})

	t.Run("access token faults", func(t *testing.T) {
		s.FailNext(githubtest.KindAccessToken, 1, 503)
		c, _ := installationClient(t, s, instID)
		if _, _, err := c.Repositories.Get(ctx, owner, name); err == nil || !strings.Contains(err.Error(), "503") {
			t.Fatalf("token fetch failure not surfaced: %v", err)
		}
		if _, _, err := c.Repositories.Get(ctx, owner, name); err != nil {
			t.Fatalf("token fetch retry: %v", err)
		}
	})

	t.Run("any kind", func(t *testing.T) {
		c, _ := installationClient(t, s, instID)
		if _, _, err := c.Repositories.Get(ctx, owner, name); err != nil { // fetch the token first
			t.Fatal(err)
		}
		s.FailNext(githubtest.AnyKind, 2, 504)
		_, _, err1 := c.Git.GetRef(ctx, owner, name, "heads/main")
		_, _, err2 := c.PullRequests.List(ctx, owner, name, nil)
		_, _, err3 := c.Git.GetRef(ctx, owner, name, "heads/main")
		if errorStatus(err1) != 504 || errorStatus(err2) != 504 || err3 != nil {
			t.Fatalf("AnyKind: %v / %v / %v", err1, err2, err3)
		}
	})

	t.Run("fail each kind", func(t *testing.T) {
		s.ClearFaults()
		s.FailEach(2, 502, githubtest.KindGetRef, githubtest.KindListPulls)
		c, _ := installationClient(t, s, instID)
		fails := 0
		for i := 0; i < 3; i++ {
			if _, _, err := c.Git.GetRef(ctx, owner, name, "heads/main"); err != nil {
				fails++
			}
			if _, _, err := c.PullRequests.List(ctx, owner, name, nil); err != nil {
				fails++
			}
		}
		if fails != 4 {
			t.Fatalf("fails = %d, want 2 per kind", fails)
		}
	})

	t.Run("random", func(t *testing.T) {
		s.FailRate(0.5, 42, githubtest.KindGetCommit)
		defer s.FailRate(0, 0)
		c, _ := installationClient(t, s, instID)
		var ok, failed int
		for i := 0; i < 40; i++ {
			_, _, err := c.Git.GetCommit(ctx, owner, name, info.HeadSHA)
			var ae *github.AbuseRateLimitError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &ae):
				failed++
				c, _ = installationClient(t, s, instID) // go-github would wait Retry-After itself
				s.EndRateLimits()                       // and so does the new client
			case errorStatus(err) >= 500:
				failed++
			default:
				t.Fatalf("unexpected error: %v", err)
			}
		}
		if ok == 0 || failed == 0 {
			t.Fatalf("ok %d failed %d, want both", ok, failed)
		}
	})
	if v := s.Violations(); len(v) != 0 {
		t.Errorf("faults must not be violations: %+v", v)
	}
}

func TestWithRateLimitExhaustion(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, false, githubtest.WithRateLimit(3, time.Hour))
	ctx := context.Background()
	c, _ := installationClient(t, s, instID)
	for i := 0; i < 3; i++ {
		if _, _, err := c.Repositories.Get(ctx, owner, name); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	_, _, err := c.Repositories.Get(ctx, owner, name)
	var rl *github.RateLimitError
	if !errors.As(err, &rl) {
		t.Fatalf("want RateLimitError after the limit: %v", err)
	}
}

func TestUnknownRouteAndStrictReporting(t *testing.T) {
	t.Parallel()
	rec := &recordingTB{TB: t}
	s := githubtest.New(rec)
	s.AddRepo(owner, name, 9001, "main", true)
	s.AddInstallation(instID, full)
	ctx := context.Background()
	c, _ := installationClient(t, s, instID)
	// An endpoint the fake does not serve: 404 and a test failure.
	_, _, err := c.Issues.CreateComment(ctx, owner, name, 1, &github.IssueComment{Body: github.String("hi")})
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != 404 || er.Message != "Not Found" || er.DocumentationURL != "https://docs.github.com/rest" {
		t.Fatalf("unknown route: %v", err)
	}
	// A bad body: the violation fails the test through the TB.
	_, _, _ = c.Checks.CreateCheckRun(ctx, owner, name, github.CreateCheckRunOptions{Name: "x", HeadSHA: strings.Repeat("e", 40)})
	errs := rec.errors()
	if len(errs) != 2 || !strings.Contains(errs[0], "unexpected request POST /repos/octo-org/widgets/issues/1/comments") ||
		!strings.Contains(errs[1], "No commit found") && !strings.Contains(errs[1], "not a commit") {
		t.Errorf("reported errors = %q", errs)
	}
	if s.Count(githubtest.KindUnknown) != 1 {
		t.Errorf("unknown count = %d", s.Count(githubtest.KindUnknown))
	}
}

// TestConcurrentClients provisions many branches, pull requests and check
// runs from several clients at once (run with -race).
func TestConcurrentClients(t *testing.T) {
	t.Parallel()
	s, info := setup(t, false, githubtest.WithLatency(time.Millisecond))
	ctx := context.Background()
	const workers, per = 4, 10
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c, _ := installationClient(t, s, instID)
			for i := 0; i < per; i++ {
				branch := fmt.Sprintf("gitlease/%d-%d", w, i)
				cm, _, err := c.Git.CreateCommit(ctx, owner, name, &github.Commit{
					Message: github.String("start " + branch), Tree: &github.Tree{SHA: github.String(info.TreeSHA)},
					Parents: []*github.Commit{{SHA: github.String(info.HeadSHA)}},
				}, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if _, _, err := c.Git.CreateRef(ctx, owner, name, &github.Reference{Ref: github.String("refs/heads/" + branch), Object: &github.GitObject{SHA: cm.SHA}}); err != nil {
					t.Error(err)
					return
				}
				if _, _, err := c.PullRequests.Create(ctx, owner, name, &github.NewPullRequest{Title: github.String(branch), Head: github.String(branch), Base: github.String("main"), Draft: github.Bool(true)}); err != nil {
					t.Error(err)
					return
				}
				if _, _, err := c.Checks.CreateCheckRun(ctx, owner, name, github.CreateCheckRunOptions{Name: "gitlease", HeadSHA: cm.GetSHA(), ExternalID: github.String(branch)}); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if got := len(s.Branches(full)); got != workers*per+1 {
		t.Errorf("branches = %d", got)
	}
	prs := s.PullRequests(full)
	seen := map[int]bool{}
	for _, p := range prs {
		if seen[p.Number] || !p.Draft {
			t.Errorf("pull %+v duplicated or not draft", p)
		}
		seen[p.Number] = true
	}
	if len(prs) != workers*per || len(s.CheckRuns(full)) != workers*per {
		t.Errorf("pulls %d check runs %d", len(prs), len(s.CheckRuns(full)))
	}
}
