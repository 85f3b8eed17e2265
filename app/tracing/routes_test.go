package tracing

import (
	"net/http"
	"testing"
)

// TestGitHubRouteNames: a GitHub call's span is named by its route
// template on github.com and under GitHub Enterprise Server's /api/v3/;
// a route outside the list, or outside the API's path, by its method.
func TestGitHubRouteNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ apiPath, method, url, want string }{
		{"/", "POST", "https://api.github.com/repos/octo/hello/check-runs", "POST /repos/{owner}/{repo}/check-runs"},
		{"/", "PATCH", "https://api.github.com/repos/octo/hello/check-runs/42", "PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}"},
		{"/", "GET", "https://api.github.com/repos/octo/hello/git/ref/heads/gitlease/issue-1", "GET /repos/{owner}/{repo}/git/ref/{ref}"},
		{"/", "POST", "https://api.github.com/app/installations/7/access_tokens", "POST /app/installations/{installation_id}/access_tokens"},
		{"/", "GET", "https://api.github.com/app/hook/deliveries?per_page=100", "GET /app/hook/deliveries"},
		{"/api/v3/", "POST", "https://ghes.example.com/api/v3/repos/octo/hello/pulls", "POST /repos/{owner}/{repo}/pulls"},
		{"/api/v3/", "GET", "https://ghes.example.com/api/v3/app", "GET /app"},
		{"/api/v3/", "GET", "https://ghes.example.com/repos/octo/hello", "GET"},
		{"/", "DELETE", "https://api.github.com/repos/octo/hello", "DELETE"},
		{"/", "GET", "https://api.github.com/octocat", "GET"},
	} {
		r, err := http.NewRequest(c.method, c.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := newGitHubRoutes(c.apiPath).name(r); got != c.want {
			t.Errorf("%s %s under %s: span %q, want %q", c.method, c.url, c.apiPath, got, c.want)
		}
	}
}
