package outbox

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"

	"github.com/gitlease/gitlease/webhook"
)

// What an item's check run shows while it is the developer's console
// (docs/github.md): the Cancel button while the item is live, and the
// summary page every state writes.

// cancelButton is the one action of a live item's check run: GitHub sends
// check_run requested_action with its identifier when it is pressed.
// GitHub allows at most 3 actions, a label of 20 characters, a description
// of 40 and an identifier of 20.
func cancelButton() []*gh.CheckRunAction {
	return []*gh.CheckRunAction{{Label: "Cancel", Description: "Stop this work and cancel its item", Identifier: webhook.CancelAction}}
}

// actionsFor are the actions a check run in status gets: the Cancel button
// while queued or in progress, none (an empty list, which removes the
// button) once completed; nil (actions left as they are) for an update
// that does not change the status.
func actionsFor(status string) *[]*gh.CheckRunAction {
	switch status {
	case "queued", "in_progress":
		a := cancelButton()
		return &a
	case "completed":
		return &[]*gh.CheckRunAction{}
	}
	return nil
}

// checkRunPatch is an update of a check run that can say actions: [],
// which go-github's UpdateCheckRunOptions omits (its field is omitempty):
// the outer field wins over the embedded one of the same JSON name.
type checkRunPatch struct {
	gh.UpdateCheckRunOptions
	Actions *[]*gh.CheckRunAction `json:"actions,omitempty"`
}

// patchCheckRun sends PATCH /repos/{owner}/{repo}/check-runs/{id}.
func patchCheckRun(ctx context.Context, c *gh.Client, owner, repo string, id int64, body checkRunPatch) (*gh.CheckRun, *gh.Response, error) {
	req, err := c.NewRequest("PATCH", fmt.Sprintf("repos/%s/%s/check-runs/%d", url.PathEscape(owner), url.PathEscape(repo), id), body)
	if err != nil {
		return nil, nil, err
	}
	run := new(gh.CheckRun)
	resp, err := c.Do(ctx, req, run)
	if err != nil {
		return nil, resp, err
	}
	return run, resp, nil
}

// pageFacts is what a check run's summary page says about its item.
type pageFacts struct {
	headline    string // the one line at the top: why, who and how
	subject     string // qualified ID
	generation  uint64
	entryID     string
	meta        webhook.ItemMeta
	branch      string // the item's head branch, "" when none
	prNumber    int
	prURL       string
	dashboard   string // the item's dashboard page, "" without GITLEASE_PUBLIC_URL
	started     time.Time
	ended       time.Time // zero while it runs
	now         time.Time
	exitCode    *int
	worker      string
	leaseExpiry time.Time
}

// summaryPage renders a check run's summary: the headline, then a small
// table of the item (subject and generation, entry, branch and pull
// request, dashboard, run time, exit status).
func summaryPage(f pageFacts) string {
	var b strings.Builder
	b.WriteString("**" + mdEscape(f.headline) + "**\n\n")
	b.WriteString("| | |\n|---|---|\n")
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, v) }
	subject := "`" + f.subject + "`"
	if f.meta.HTMLURL != "" {
		subject = fmt.Sprintf("[%s#%d](%s) (%s)", mdEscape(f.meta.Repository), f.meta.Number, f.meta.HTMLURL, subject)
	}
	row("Subject", fmt.Sprintf("%s, generation %d", subject, f.generation))
	entry := "`" + f.entryID + "`"
	if f.dashboard != "" {
		entry += fmt.Sprintf(" ([dashboard](%s))", f.dashboard)
	}
	row("Entry", entry)
	if f.branch != "" {
		br := "`" + f.branch + "`"
		if web := repoWebURL(f.meta); web != "" && !strings.HasPrefix(f.branch, "refs/") {
			br = fmt.Sprintf("[`%s`](%s/tree/%s)", f.branch, web, branchPath(f.branch))
		}
		row("Branch", br)
	}
	switch {
	case f.prURL != "":
		row("Pull request", fmt.Sprintf("[#%d](%s)", f.prNumber, f.prURL))
	case f.meta.Kind == webhook.KindPullRequest && f.meta.HTMLURL != "":
		row("Pull request", fmt.Sprintf("[#%d](%s)", f.meta.Number, f.meta.HTMLURL))
	}
	if f.worker != "" {
		row("Worker", "`"+mdEscape(f.worker)+"`")
	}
	if !f.started.IsZero() {
		end, what := f.ended, "Run time"
		if end.IsZero() {
			end, what = f.now, "Running for"
		}
		row(what, end.Sub(f.started).Round(time.Second).String())
	}
	if f.ended.IsZero() && !f.leaseExpiry.IsZero() {
		row("Lease expires", f.leaseExpiry.UTC().Format(time.RFC3339)+" unless renewed")
	}
	if f.exitCode != nil {
		row("Exit status", fmt.Sprint(*f.exitCode))
	}
	return b.String()
}

// repoWebURL is the repository's web page, read off the subject's html_url
// (https://github.com/o/r/issues/42 → https://github.com/o/r), so it is the
// GitHub the subject lives on (GitHub Enterprise Server included).
func repoWebURL(m webhook.ItemMeta) string {
	for _, sep := range []string{"/issues/", "/pull/"} {
		if i := strings.LastIndex(m.HTMLURL, sep); i > 0 {
			return m.HTMLURL[:i]
		}
	}
	return ""
}

// branchPath escapes a branch name for a /tree/ link, keeping its slashes.
func branchPath(branch string) string {
	parts := strings.Split(branch, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// mdEscape keeps text from outside (a login, a worker's ID) from breaking
// the page's emphasis and table.
func mdEscape(s string) string {
	return strings.NewReplacer("|", "\\|", "*", "\\*", "_", "\\_", "`", "\\`", "\n", " ").Replace(s)
}
