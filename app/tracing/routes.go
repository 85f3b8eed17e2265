package tracing

import (
	"net/http"
	"strings"
)

// githubRoutePatterns are the GitHub REST routes gitlease calls, as GitHub's
// REST description names them; a client span is named by the one a request
// matches.
var githubRoutePatterns = []string{
	"GET /app",
	"POST /app/installations/{installation_id}/access_tokens",
	"POST /app-manifests/{code}/conversions",
	"GET /app/hook/deliveries",
	"GET /app/hook/deliveries/{delivery_id}",
	"POST /app/hook/deliveries/{delivery_id}/attempts",
	"DELETE /installation/token",
	"GET /repos/{owner}/{repo}",
	"GET /repos/{owner}/{repo}/git/ref/{ref...}",
	"GET /repos/{owner}/{repo}/git/refs/{ref...}",
	"POST /repos/{owner}/{repo}/git/refs",
	"PATCH /repos/{owner}/{repo}/git/refs/{ref...}",
	"GET /repos/{owner}/{repo}/git/commits/{commit_sha}",
	"POST /repos/{owner}/{repo}/git/commits",
	"GET /repos/{owner}/{repo}/git/trees/{tree_sha}",
	"GET /repos/{owner}/{repo}/pulls",
	"POST /repos/{owner}/{repo}/pulls",
	"GET /repos/{owner}/{repo}/pulls/{pull_number}",
	"POST /repos/{owner}/{repo}/check-runs",
	"GET /repos/{owner}/{repo}/check-runs/{check_run_id}",
	"PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}",
	"GET /repos/{owner}/{repo}/check-runs/{check_run_id}/annotations",
	"GET /repos/{owner}/{repo}/commits/{ref}/check-runs",
}

// githubRoutes finds a request's route template with a ServeMux holding
// the patterns: its Handler reports the pattern a request matches.
type githubRoutes struct {
	prefix string // the API path prefix without its trailing slash
	mux    *http.ServeMux
}

func newGitHubRoutes(apiPath string) *githubRoutes {
	g := &githubRoutes{prefix: strings.TrimSuffix(apiPath, "/"), mux: http.NewServeMux()}
	for _, p := range githubRoutePatterns {
		g.mux.Handle(p, http.NotFoundHandler())
	}
	return g
}

// name is the span name of r: "METHOD /route/{template}", or the method
// alone (HTTP semantic conventions) for a route outside the list.
func (g *githubRoutes) name(r *http.Request) string {
	path, ok := strings.CutPrefix(r.URL.Path, g.prefix)
	if !ok {
		return r.Method
	}
	u := *r.URL
	u.Path, u.RawPath = path, ""
	if _, pattern := g.mux.Handler(&http.Request{Method: r.Method, Host: r.Host, URL: &u}); pattern != "" {
		return strings.ReplaceAll(pattern, "...}", "}") // GitHub writes {ref}, ServeMux {ref...}
	}
	return r.Method
}
