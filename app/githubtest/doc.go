// Package githubtest is a strict fake of the GitHub REST API, the one gitlease
// has: the tests use it, and so does gitlease dev's dry run.
//
// New starts, for a test, an httptest.Server that serves, at its root, the
// api.github.com paths gitlease uses: the GitHub App endpoints (GET /app, installation access
// tokens, manifest conversions), repositories, Git refs, commits and trees,
// pull requests and check runs. It behaves like GitHub for these endpoints:
// the same authentication (an RS256 App JWT for /app endpoints, an
// installation access token for repository endpoints), the same status codes
// and JSON error bodies, and JSON responses shaped so that go-github v66
// decodes them.
//
// The fake is strict: every request GitHub would reject is answered as GitHub
// answers it and is also reported as a Violation, which fails the test
// through the testing.TB given to New (unless the Lenient option is used).
// NewHandler makes the same fake without a listener, for use outside tests:
// it answers through ServeHTTP or, in process, Transport, and reports to a
// Reporter such as LogReporter, which logs violations instead of failing
// anything. WithAutoCreate makes it create the installations, repositories
// and base branches requests name, so a client runs against it with no
// set-up; gitlease dev uses both.
// A few rejections are a normal part of talking to GitHub and are answered
// without failing the test: a 404 for a ref, pull request, check run or
// manifest code that does not exist (a probe), 422 "Reference already
// exists", 422 "A pull request already exists" and 422 "Draft pull requests
// are not supported in this repository" (the create-if-absent and fallback
// paths). Injected faults never count as violations either.
//
// Request bodies and query parameters are checked against the request
// schemas of GitHub's own OpenAPI description (package openapi, which
// embeds an extract of it; see openapi/README.md): required fields, types,
// enums, maximum lengths and item counts. Rules the description does not
// express (a conclusion is required when a check run completes, annotation
// raw_details is at most 64 KB, a ref name must be a valid Git ref name, the
// objects a request names must exist, ...) are checked by hand.
//
// The App's webhook is served too (hooks.go): SetWebhook points it at a URL
// and Deliver sends a signed delivery there as GitHub does, recording each
// attempt in the App's delivery log the way GitHub records it ("OK" on a
// 2xx answer, status code 0 when none came). GET /app/hook/deliveries lists
// the attempts of the last 3 days (by SetHookClock's clock) newest first,
// per_page at most 100, with the next page's cursor in the Link header, and
// POST /app/hook/deliveries/{id}/attempts redelivers one (202, then a new
// attempt of the same guid and payload with redelivery true; 422 when it is
// older than 3 days).
//
// Fault injection (FailNext, FailEach, SecondaryRateLimit, PrimaryRateLimit,
// LoseResponses, FailRate) makes requests fail before they have any effect,
// or, with LoseResponses, after their effect (the response is lost), so tests
// can exercise retries, rate-limit handling and create-if-absent idempotency.
//
// Rate-limit scopes (ratescope.go): every rate limit the fake answers (a
// primary limit until its x-ratelimit-reset, a secondary one for its
// Retry-After, or a minute without one) opens a scope on that credential (an
// installation's token, or the App JWT) across all routes. A call of that
// credential that arrives while the scope holds is a violation, as GitHub
// escalates such calls to a ban; calls that arrive within InFlightGrace of
// the answer were already in flight and are excused. EarlyCalls counts them;
// EndRateLimits closes the scopes for a test that stands for a client that
// waited.
//
// Everything a test may want to assert is available as snapshots: Requests,
// Count, Refs, Branch, Commits, PullRequests, CheckRuns, Violations. All
// methods of Server are safe for concurrent use, and the package has no
// package-level mutable state, so tests can run in parallel, each with its
// own fake, and several clients can share one fake.
package githubtest
