package outbox

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gitlease/gitlease/webhook"
)

// TestSummaryPage: the headline on top, then the item's table with links,
// the run time and the exit status; text from outside cannot break the
// page's emphasis or its table.
func TestSummaryPage(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	code := 3
	page := summaryPage(pageFacts{
		headline: "Cancelled by @octo_cat* with the Cancel button", subject: "github_issue:1296269#42", generation: 2,
		entryID: "8f1c2d6e-0000-4000-8000-000000000000",
		meta:    webhook.ItemMeta{Kind: webhook.KindIssue, Metadata: webhook.Metadata{Repository: "octocat/Hello-World", Number: 42, HTMLURL: "https://github.com/octocat/Hello-World/issues/42"}},
		branch:  "gitlease/issue-42", prNumber: 43, prURL: "https://github.com/octocat/Hello-World/pull/43",
		dashboard: "https://gitlease.example/ui/items/8f1c2d6e-0000-4000-8000-000000000000",
		started:   start, ended: start.Add(61 * time.Second), exitCode: &code, worker: "gitlease-serve/host|x",
	})
	for _, want := range []string{
		"**Cancelled by @octo\\_cat\\* with the Cancel button**\n",
		"| Subject | [octocat/Hello-World#42](https://github.com/octocat/Hello-World/issues/42) (`github_issue:1296269#42`), generation 2 |",
		"([dashboard](https://gitlease.example/ui/items/8f1c2d6e-0000-4000-8000-000000000000))",
		"| Branch | [`gitlease/issue-42`](https://github.com/octocat/Hello-World/tree/gitlease/issue-42) |",
		"| Pull request | [#43](https://github.com/octocat/Hello-World/pull/43) |",
		"| Worker | `gitlease-serve/host\\|x` |",
		"| Run time | 1m1s |",
		"| Exit status | 3 |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	running := summaryPage(pageFacts{headline: "Running", subject: "q", started: start, now: start.Add(90 * time.Second), leaseExpiry: start.Add(time.Hour)})
	if !strings.Contains(running, "| Running for | 1m30s |") || !strings.Contains(running, "| Lease expires |") || strings.Contains(running, "Exit status") {
		t.Errorf("running page:\n%s", running)
	}
}

// TestOutputText: a command's output is one code block that a fence in it
// cannot close, cut to its end within GitHub's 65,535 bytes on a UTF-8
// boundary.
func TestOutputText(t *testing.T) {
	t.Parallel()
	if got := outputText("a\n```\nb"); got != "```\na\n`\u200b``\nb\n```" {
		t.Errorf("fenced output = %q", got)
	}
	long := strings.Repeat("é", 40000) + "the end"
	got := outputText(long)
	if len(got) > maxTextBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, "the end\n```") || !strings.HasPrefix(got, "```\n") {
		t.Errorf("long output: %d bytes, valid %v, ends %q", len(got), utf8.ValidString(got), got[len(got)-12:])
	}
}
