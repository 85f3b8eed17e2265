package githubtest

import (
	"net/http"
	"strings"
)

// routes lists the endpoints the fake serves. Each names its operation in
// openapi/requests.json (for validation and documentation_url), how it is
// authenticated and, for repository endpoints, the installation permission
// it needs.
func (s *Server) routes() []*route {
	const repo = "/repos/{owner}/{repo}"
	return []*route{
		{kind: KindGetApp, pattern: "GET /app", op: "GET /app", auth: authJWT, handle: s.handleGetApp},
		{kind: KindAccessToken, pattern: "POST /app/installations/{installation_id}/access_tokens",
			op: "POST /app/installations/{installation_id}/access_tokens", auth: authJWT, handle: s.handleAccessToken},
		{kind: KindManifest, pattern: "POST /app-manifests/{code}/conversions",
			op: "POST /app-manifests/{code}/conversions", auth: authNone, handle: s.handleManifest},
		{kind: KindListHookDeliveries, pattern: "GET /app/hook/deliveries", op: "GET /app/hook/deliveries", auth: authJWT, handle: s.handleListHookDeliveries},
		{kind: KindRedeliverHook, pattern: "POST /app/hook/deliveries/{delivery_id}/attempts",
			op: "POST /app/hook/deliveries/{delivery_id}/attempts", auth: authJWT, write: true, handle: s.handleRedeliverHook},
		// Authenticated by the token it revokes, in its handler: the route
		// has no repository for authInstallation to check.
		{kind: KindRevokeToken, pattern: "DELETE /installation/token", op: "DELETE /installation/token",
			auth: authNone, handle: s.handleRevokeToken},

		{kind: KindGetRepo, pattern: "GET " + repo, op: "GET /repos/{owner}/{repo}",
			auth: authInstallation, perm: "metadata", handle: s.handleGetRepo},

		{kind: KindGetRef, pattern: "GET " + repo + "/git/ref/{ref...}", op: "GET /repos/{owner}/{repo}/git/ref/{ref}",
			auth: authInstallation, perm: "contents", handle: s.handleGetRef},
		// The legacy plural form GitHub still serves for a single ref.
		{kind: KindGetRef, pattern: "GET " + repo + "/git/refs/{ref...}", op: "GET /repos/{owner}/{repo}/git/ref/{ref}",
			auth: authInstallation, perm: "contents", handle: s.handleGetRef},
		{kind: KindCreateRef, pattern: "POST " + repo + "/git/refs", op: "POST /repos/{owner}/{repo}/git/refs",
			auth: authInstallation, perm: "contents", write: true, handle: s.handleCreateRef},
		{kind: KindUpdateRef, pattern: "PATCH " + repo + "/git/refs/{ref...}", op: "PATCH /repos/{owner}/{repo}/git/refs/{ref}",
			auth: authInstallation, perm: "contents", write: true, handle: s.handleUpdateRef},

		{kind: KindGetCommit, pattern: "GET " + repo + "/git/commits/{commit_sha}", op: "GET /repos/{owner}/{repo}/git/commits/{commit_sha}",
			auth: authInstallation, perm: "contents", handle: s.handleGetCommit},
		{kind: KindCreateCommit, pattern: "POST " + repo + "/git/commits", op: "POST /repos/{owner}/{repo}/git/commits",
			auth: authInstallation, perm: "contents", write: true, handle: s.handleCreateCommit},
		{kind: KindGetTree, pattern: "GET " + repo + "/git/trees/{tree_sha}", op: "GET /repos/{owner}/{repo}/git/trees/{tree_sha}",
			auth: authInstallation, perm: "contents", handle: s.handleGetTree},

		{kind: KindListPulls, pattern: "GET " + repo + "/pulls", op: "GET /repos/{owner}/{repo}/pulls",
			auth: authInstallation, perm: "pull_requests", handle: s.handleListPulls},
		{kind: KindCreatePull, pattern: "POST " + repo + "/pulls", op: "POST /repos/{owner}/{repo}/pulls",
			auth: authInstallation, perm: "pull_requests", write: true, handle: s.handleCreatePull},
		{kind: KindGetPull, pattern: "GET " + repo + "/pulls/{pull_number}", op: "GET /repos/{owner}/{repo}/pulls/{pull_number}",
			auth: authInstallation, perm: "pull_requests", handle: s.handleGetPull},

		{kind: KindCreateCheckRun, pattern: "POST " + repo + "/check-runs", op: "POST /repos/{owner}/{repo}/check-runs",
			auth: authInstallation, perm: "checks", write: true, handle: s.handleCreateCheckRun},
		{kind: KindGetCheckRun, pattern: "GET " + repo + "/check-runs/{check_run_id}", op: "GET /repos/{owner}/{repo}/check-runs/{check_run_id}",
			auth: authInstallation, perm: "checks", handle: s.handleGetCheckRun},
		{kind: KindUpdateCheckRun, pattern: "PATCH " + repo + "/check-runs/{check_run_id}", op: "PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}",
			auth: authInstallation, perm: "checks", write: true, handle: s.handleUpdateCheckRun},
		{kind: KindListAnnotations, pattern: "GET " + repo + "/check-runs/{check_run_id}/annotations",
			op:   "GET /repos/{owner}/{repo}/check-runs/{check_run_id}/annotations",
			auth: authInstallation, perm: "checks", handle: s.handleListAnnotations},
		// {ref} may contain slashes (a branch such as gitlease/7), which a
		// ServeMux wildcard cannot express before a suffix: match the rest
		// of the path and require the /check-runs suffix.
		{kind: KindListCheckRunsForRef, pattern: "GET " + repo + "/commits/{rest...}",
			op:    "GET /repos/{owner}/{repo}/commits/{ref}/check-runs",
			match: func(r *http.Request) bool { return checkRunsRef(r) != "" },
			auth:  authInstallation, perm: "checks", handle: s.handleListCheckRunsForRef},
	}
}

// checkRunsRef returns the {ref} of GET .../commits/{ref}/check-runs, ""
// when the path is not of that form.
func checkRunsRef(r *http.Request) string {
	ref, ok := strings.CutSuffix(r.PathValue("rest"), "/check-runs")
	if !ok || ref == "" || strings.HasSuffix(ref, "/") {
		return ""
	}
	return ref
}
