package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
)

// Progress copies a running command's output into its item's check run
// (SPEC §8.3): elapsed time in the summary, the output's tail in
// output.text. A progress update is no outbox row: it is best effort and
// yields (github.Yielding) to every other write of its installation, so
// it is skipped, never queued, while writes are backed up, and it waits
// for the item's own state changes (a check run not yet created, or not
// yet in progress, gets none).
type Progress struct {
	pool      *pgxpool.Pool
	q         *dbq.Queries
	gh        *github.Installations
	publicURL string
	now       func() time.Time
}

// NewProgress returns a Progress writing through gh; publicURL
// (GITLEASE_PUBLIC_URL) links the summary to the dashboard.
func NewProgress(pool *pgxpool.Pool, gh *github.Installations, publicURL string) *Progress {
	return &Progress{pool: pool, q: dbq.New(), gh: gh, publicURL: publicURL, now: time.Now}
}

// Show writes output as the progress of the running item entryID. It
// reports whether the check run was updated: false, with a nil error, when
// the update was skipped (no check run yet, state changes still to send,
// the item no longer assigned, writes backed up); the caller tries again
// at its next interval.
func (p *Progress) Show(ctx context.Context, entryID, output string) (bool, error) {
	id, err := uuid.Parse(entryID)
	if err != nil {
		return false, fmt.Errorf("progress of %q: not an entry ID", entryID)
	}
	busy, err := p.q.OutboxLanePending(ctx, p.pool, "checks/"+entryID)
	if err != nil {
		return false, fmt.Errorf("look for the check run's pending writes: %w", err)
	}
	if busy {
		return false, nil
	}
	s := &Sender{pool: p.pool, q: p.q, gh: p.gh, cfg: SenderConfig{PublicURL: p.publicURL, Now: p.now}}
	t, err := s.targetOf(ctx, dbq.Outbox{EntryID: &id})
	if err != nil {
		return false, err
	}
	runID := dbq.Deref(t.g.CheckRunID)
	if runID == 0 || t.w.Status() != queue.StatusAssigned {
		return false, nil
	}
	owner, repo, _ := strings.Cut(t.m.Repository, "/")
	body := checkRunPatch{UpdateCheckRunOptions: gh.UpdateCheckRunOptions{
		Name: CheckName,
		Output: &gh.CheckRunOutput{
			Title:   gh.String(fitTitle(orDefault(dbq.Deref(t.g.CheckTitle), fmt.Sprintf("In progress: generation %d", t.w.Generation())))),
			Summary: gh.String(fitText(summaryPage(s.facts(t, "Running: the command's latest output is below")))),
			Text:    gh.String(outputText(output)),
		},
	}}
	_, _, err = patchCheckRun(github.Yielding(ctx), t.c, owner, repo, runID, body)
	if errors.Is(err, github.ErrYielded) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("update check run %d with progress: %w", runID, err)
	}
	return true, nil
}

// outputText is a command's output tail as a check run's output.text: a
// code block, its end kept when it is too long.
func outputText(output string) string {
	const open, end = "```\n", "\n```"
	output = strings.ReplaceAll(output, "```", "`\u200b``") // a fence in the output must not end the block
	if max := maxTextBytes - len(open) - len(end); len(output) > max {
		cut := len(output) - max
		for cut < len(output) && (output[cut]&0xC0) == 0x80 {
			cut++
		}
		output = output[cut:]
	}
	return open + output + end
}
