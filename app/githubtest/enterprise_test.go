package githubtest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-github/v66/github"

	"github.com/gitlease/gitlease/app/githubtest"
)

// TestEnterprise: as GitHub Enterprise Server the fake serves the API under
// /api/v3/ (tokens, repositories, check runs), links to its own web root,
// records paths without the prefix, and answers a request outside the
// prefix 404 with a violation.
func TestEnterprise(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, false, githubtest.Enterprise(), githubtest.Lenient())
	root := strings.TrimSuffix(s.BaseURL(), githubtest.EnterprisePrefix)
	if s.URL() != root+"/api/v3/" || s.WebURL() != root+"/" {
		t.Fatalf("URL %q, WebURL %q, want %s/api/v3/ and %s/", s.URL(), s.WebURL(), root, root)
	}
	c, _ := installationClient(t, s, instID)
	ctx := context.Background()
	repo, _, err := c.Repositories.Get(ctx, owner, name)
	if err != nil {
		t.Fatal(err)
	}
	if want := root + "/" + full; repo.GetHTMLURL() != want {
		t.Errorf("repository html_url %q, want %q", repo.GetHTMLURL(), want)
	}
	head, _, err := c.Git.GetRef(ctx, owner, name, "heads/main")
	if err != nil {
		t.Fatal(err)
	}
	cr, _, err := c.Checks.CreateCheckRun(ctx, owner, name, github.CreateCheckRunOptions{Name: "gitlease", HeadSHA: head.GetObject().GetSHA()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cr.GetHTMLURL(), root+"/"+full+"/runs/") || !strings.HasPrefix(cr.GetURL(), s.URL()) {
		t.Errorf("check run html_url %q, url %q", cr.GetHTMLURL(), cr.GetURL())
	}
	if len(s.Violations()) != 0 {
		t.Fatalf("violations: %v", s.Violations())
	}
	reqs := s.Requests()
	if last := reqs[len(reqs)-1]; last.Kind != githubtest.KindCreateCheckRun || last.Path != "/repos/"+full+"/check-runs" {
		t.Errorf("last request %s %s, want create_check_run /repos/%s/check-runs", last.Kind, last.Path, full)
	}

	// github.com's paths, without the prefix, are not GHES's.
	res, err := http.Get(root + "/repos/" + full)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound || len(s.Violations()) != 1 {
		t.Errorf("GET without the prefix = %d with %d violations, want 404 and 1", res.StatusCode, len(s.Violations()))
	}
}
