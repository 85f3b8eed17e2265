package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/githubtest"
)

// Identity of dev's fake GitHub App.
const (
	devAppID = 1
	devSlug  = "gitlease-dev"
	// devHTMLURL is the web base of the fake's html_url fields: a link to a
	// pull request or check run that exists nowhere must not look like a
	// github.com one, and .invalid never resolves (RFC 2606).
	devHTMLURL = "https://github.invalid"
)

// newDevGitHub is dev's GitHub without App credentials: the tests' strict
// fake GitHub, auto-creating every installation, repository and base
// branch a call names, answering in process (no port, nothing sent). Its
// key and App ID feed the installation clients, so JWTs and tokens are
// real ones the fake checks. Every call passes transport (serve's metrics,
// as a real call would) and then devCallLog, which logs it the way the old
// dry-run recorder did. It returns the fake too, whose Requests,
// PullRequests and CheckRuns show what was recorded.
func newDevGitHub(cfg config, transport func(http.RoundTripper) http.RoundTripper, logger *slog.Logger) (*github.Installations, *githubtest.Server, error) {
	slug := cmp.Or(cfg.AppSlug, devSlug)
	fake, err := githubtest.NewHandler(githubtest.LogReporter(logger),
		githubtest.WithApp(devAppID, slug), githubtest.WithHTMLURL(devHTMLURL),
		githubtest.WithAutoCreate(notIssueBranch(cfg.BranchPrefix)))
	if err != nil {
		return nil, nil, fmt.Errorf("set up the dry-run GitHub: %w", err)
	}
	gh, err := github.NewInstallations(github.Config{
		AppID: fake.AppID, PrivateKey: fake.PrivateKeyPEM, APIURL: fake.URL(), Slug: cfg.AppSlug,
		Transport: transport(devCallLog{next: fake.Transport(), logger: logger}),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("set up the dry-run GitHub: %w", err)
	}
	return gh, fake, nil
}

// notIssueBranch tells the fake which branches exist before gitlease
// comes: all but the issue head branches gitlease creates itself
// (<prefix>issue-<number>, as the webhook mapper names them), which must
// stay absent until provisioning creates them.
func notIssueBranch(prefix string) func(branch string) bool {
	return func(branch string) bool {
		n, ok := strings.CutPrefix(branch, prefix+"issue-")
		return !ok || n == "" || strings.Trim(n, "0123456789") != ""
	}
}

// devCallLog is an http.RoundTripper that logs each GitHub call of dev's
// dry run: a write (token minting aside) at info level as "dry-run GitHub
// call" with the method, path, status and what it would have changed
// (check run status, conclusion, title, annotation count, head SHA, ref,
// pull request head, base and number, check run ID); anything else at
// debug level as "dry-run GitHub request".
type devCallLog struct {
	next   http.RoundTripper
	logger *slog.Logger
}

// devMaxLoggedBody bounds how much of a write's bodies is read to
// summarise it; the fake takes no more than this in one request anyway.
const devMaxLoggedBody = 50 << 20

func (d devCallLog) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	write := req.Method != http.MethodGet && req.Method != http.MethodHead && !strings.HasPrefix(req.URL.Path, "/app/")
	if !write {
		res, err := d.next.RoundTrip(req)
		if err == nil {
			d.logger.DebugContext(ctx, "dry-run GitHub request", "method", req.Method, "path", req.URL.Path, "http_status", res.StatusCode)
		}
		return res, err
	}
	var sent []byte
	if req.Body != nil {
		var err error
		sent, err = io.ReadAll(io.LimitReader(req.Body, devMaxLoggedBody))
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("dry-run GitHub: read request body: %w", err)
		}
		// A copy carries the body on: a RoundTripper must not change the
		// caller's request.
		req = req.Clone(ctx)
		req.Body = io.NopCloser(bytes.NewReader(sent))
	}
	res, err := d.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	answer, err := io.ReadAll(io.LimitReader(res.Body, devMaxLoggedBody))
	res.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("dry-run GitHub: read response body: %w", err)
	}
	res.Body = io.NopCloser(bytes.NewReader(answer))
	attrs := append([]any{"method", req.Method, "path", req.URL.Path, "http_status", res.StatusCode}, writeSummary(req.URL.Path, sent, answer)...)
	d.logger.InfoContext(ctx, "dry-run GitHub call", attrs...)
	return res, nil
}

// writeSummary picks from a write's request and answer the fields worth a
// log line; what the request leaves out is left out.
func writeSummary(path string, sent, answer []byte) []any {
	var in struct {
		Name       string   `json:"name"`
		HeadSHA    string   `json:"head_sha"`
		Status     string   `json:"status"`
		Conclusion string   `json:"conclusion"`
		Ref        string   `json:"ref"`
		SHA        string   `json:"sha"`
		Message    string   `json:"message"`
		Parents    []string `json:"parents"`
		Title      string   `json:"title"`
		Head       string   `json:"head"`
		Base       string   `json:"base"`
		Draft      *bool    `json:"draft"`
		Output     *struct {
			Title       string            `json:"title"`
			Annotations []json.RawMessage `json:"annotations"`
		} `json:"output"`
	}
	var out struct {
		ID     int64  `json:"id"`
		Number int    `json:"number"`
		SHA    string `json:"sha"`
	}
	// Unreadable bodies just make a shorter line: the fake reports them.
	_ = json.Unmarshal(sent, &in)
	_ = json.Unmarshal(answer, &out)
	var attrs []any
	add := func(k, v string) {
		if v != "" {
			attrs = append(attrs, k, v)
		}
	}
	subject, _, _ := strings.Cut(in.Message, "\n")
	add("name", in.Name)
	add("head_sha", in.HeadSHA)
	add("status", in.Status)
	add("conclusion", in.Conclusion)
	add("ref", in.Ref)
	add("message", shortForLog(subject))
	add("parents", strings.Join(in.Parents, ","))
	add("sha", cmp.Or(in.SHA, out.SHA))
	add("head", in.Head)
	add("base", in.Base)
	if in.Output != nil {
		add("title", shortForLog(in.Output.Title))
	} else {
		add("title", shortForLog(in.Title))
	}
	if in.Draft != nil {
		attrs = append(attrs, "draft", *in.Draft)
	}
	if strings.HasSuffix(path, "/pulls") && out.Number > 0 {
		attrs = append(attrs, "number", out.Number)
	}
	if i := strings.LastIndex(path, "/check-runs"); i >= 0 {
		n := 0
		if in.Output != nil {
			n = len(in.Output.Annotations)
		}
		attrs = append(attrs, "annotations", n)
		// The ID is the path's on an update, the answer's on a creation.
		if id, err := strconv.ParseInt(strings.TrimPrefix(path[i:], "/check-runs/"), 10, 64); err == nil {
			attrs = append(attrs, "check_run_id", id)
		} else if out.ID > 0 {
			attrs = append(attrs, "check_run_id", out.ID)
		}
	}
	return attrs
}

// shortForLog shortens s for a log line.
func shortForLog(s string) string {
	const limit = 80
	if r := []rune(s); len(r) > limit {
		return string(r[:limit-1]) + "…"
	}
	return s
}
