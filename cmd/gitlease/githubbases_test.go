package main

import (
	"fmt"
	"testing"

	"github.com/gitlease/gitlease/app/githubtest"
)

// githubBase is one kind of GitHub the GitHub-facing end-to-end tests run
// against: github.com (the API at the root) or GitHub Enterprise Server
// (the API under /api/v3/, links on the server's own host).
type githubBase struct {
	name string
	opts []githubtest.Option
}

var githubBases = []githubBase{
	{name: "github.com"},
	{name: "enterprise-server", opts: []githubtest.Option{githubtest.Enterprise()}},
}

// forEachGitHub runs test once per kind of GitHub, as parallel subtests,
// each with a fake GitHub of that kind (opts are added to the kind's).
func forEachGitHub(t *testing.T, test func(t *testing.T, gh *githubtest.Server), opts ...githubtest.Option) {
	t.Helper()
	for _, b := range githubBases {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, githubtest.New(t, append(append([]githubtest.Option(nil), b.opts...), opts...)...))
		})
	}
}

// githubEnv is the environment that points a gitlease binary at gh as its
// GitHub App.
func githubEnv(gh *githubtest.Server) []string {
	return []string{"GITHUB_APP_ID=" + fmt.Sprint(gh.AppID), "GITHUB_PRIVATE_KEY=" + string(gh.PrivateKeyPEM),
		"GITHUB_API_URL=" + gh.URL(), "GITHUB_URL=" + gh.WebURL()}
}
