package ui

import (
	"testing"
	"time"
)

// TestCheckRunLinkFollowsGitHubURL: a row links to its check run on the
// web server GITHUB_URL names (GitHub Enterprise Server's own host), not on
// github.com.
func TestCheckRunLinkFollowsGitHubURL(t *testing.T) {
	t.Parallel()
	dispatch := []byte(`{"subject":{"kind":"github_issue","metadata":{"installation_id":7,"repository_id":9,` +
		`"repository":"acme/widgets","number":3,"html_url":"https://ghe.example.com/acme/widgets/issues/3","event":"issues","action":"opened","delivery_id":"d","sender":"u"}}}`)
	run := int64(42)
	for web, want := range map[string]string{
		"https://github.com/":      "https://github.com/acme/widgets/runs/42",
		"https://ghe.example.com/": "https://ghe.example.com/acme/widgets/runs/42",
	} {
		r := rowOf(listedItem{Dispatch: dispatch}, nil, nil, &run, web, time.Now())
		if r.CheckRunURL != want {
			t.Errorf("GitHubURL %s: check run link %q, want %q", web, r.CheckRunURL, want)
		}
	}
}
