package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/queue"
)

// outboxAnswer is one outbox row as the dashboard reads it.
type outboxAnswer struct {
	kind, status, answer string
}

func (h *harness) answers(t *testing.T, entry string) []outboxAnswer {
	t.Helper()
	rows, err := h.pool.Query(context.Background(),
		`SELECT kind, status, coalesce(last_answer, '') FROM outbox WHERE entry_id = $1 ORDER BY id`, entry)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxAnswer
	for rows.Next() {
		var a outboxAnswer
		if err := rows.Scan(&a.kind, &a.status, &a.answer); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOutboxRecordsGitHubsAnswers: every row sent records what GitHub
// answered, success included, naming what it created or updated.
func TestOutboxRecordsGitHubsAnswers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	res, err := h.store.Enqueue(ctx, issueParams(7))
	if err != nil {
		t.Fatal(err)
	}
	s := h.sender(t)
	fe := h.leaseAll(t, "w1")[0]
	h.drain(t, s)
	h.complete(t, fe, queue.StatusCompleted)
	h.drain(t, s)
	v, err := h.store.View(ctx, res.EntryID)
	if err != nil {
		t.Fatal(err)
	}
	p := v.Provisioning
	if p == nil || v.CheckRunID == 0 {
		t.Fatalf("item not provisioned: %+v", v)
	}
	want := []string{
		fmt.Sprintf("201 created branch gitlease/issue-7 at %s; 201 opened draft pull request #%d", p.HeadSHA, p.PullRequestNumber),
		fmt.Sprintf("201 created check run %d on %s (in_progress)", v.CheckRunID, p.HeadSHA),
		fmt.Sprintf("200 updated check run %d (completed/success)", v.CheckRunID),
	}
	got := h.answers(t, res.EntryID)
	if len(got) != len(want) {
		t.Fatalf("outbox rows %+v, want %d", got, len(want))
	}
	for i, a := range got {
		if a.status != "done" || a.answer != want[i] {
			t.Errorf("row %d (%s): %s %q, want done %q", i, a.kind, a.status, a.answer, want[i])
		}
	}
}

// TestFailedWriteKeepsGitHubsMessage: a write GitHub refuses records its
// status, the request and GitHub's message.
func TestFailedWriteKeepsGitHubsMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, githubtest.Lenient()) // the refusal is the point
	ctx := context.Background()
	missing := strings.Repeat("0", 40) // a commit the repository does not have
	res, err := h.store.Enqueue(ctx, pullRequestParams(8, missing))
	if err != nil {
		t.Fatal(err)
	}
	s := h.sender(t)
	for range 100 {
		var pending int
		if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE status = 'pending'`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			break
		}
		if _, err := s.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := h.answers(t, res.EntryID)
	if len(got) != 1 || got[0].status != "failed" {
		t.Fatalf("outbox rows %+v, want one failed", got)
	}
	// The path is the fake's: its API sits under a prefix of its own.
	if a := got[0].answer; !strings.HasPrefix(a, "422 POST /") || !strings.HasSuffix(a, "/repos/octo/widgets/check-runs: No commit found for SHA: "+missing) {
		t.Errorf("failed row's answer %q, want 422, the request and GitHub's message", a)
	}
}
