// Package outbox is what gitlease writes to GitHub: it owns the outbox
// and github_items tables, and alone writes them. The Outbox records, in
// the queue's own transaction (as its queue.Observer), the check runs,
// annotations and provisioning an item's changes ask for; the Sender
// drains it, any number of senders in any number of processes sharing one
// outbox, each write idempotent and resumed from what exists on GitHub.
// Items reads what GitHub holds of an item for queue views and the intake.
package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gitlease/gitlease/webhook"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
)

// Outbox kinds: what a row asks the sender to do on GitHub.
const (
	kindCheckRun   = "check_run"            // bring an item's check run to a state, add annotations
	kindProvision  = "provision"            // create an issue item's branch and draft pull request
	kindStandalone = "check_run_standalone" // a check run on a commit that is not an item's
)

// CheckName is the name of every check run gitlease writes.
const CheckName = "gitlease"

// Annotation is one check-run annotation (always on .github, line 1).
type Annotation struct {
	Level      string          `json:"level"` // notice, warning or failure
	Title      string          `json:"title"`
	Message    string          `json:"message"`
	RawDetails json.RawMessage `json:"raw_details,omitempty"`
}

// checkRunUpdate is the payload of a check_run row: the check run's new
// state (Status empty: annotations only) and annotations to add.
type checkRunUpdate struct {
	Status      string       `json:"status,omitempty"`
	Conclusion  string       `json:"conclusion,omitempty"`
	Title       string       `json:"title,omitempty"`
	Summary     string       `json:"summary,omitempty"`
	Text        string       `json:"text,omitempty"`
	Annotations []Annotation `json:"annotations,omitempty"`
}

// provisionRequest is the payload of a provision row.
type provisionRequest struct {
	LeaseGeneration int64 `json:"lease_generation"`
}

// standaloneCheckRun is the payload of a check_run_standalone row.
type standaloneCheckRun struct {
	InstallationID int64  `json:"installation_id"`
	Repository     string `json:"repository"` // owner/name
	HeadSHA        string `json:"head_sha"`
	ExternalID     string `json:"external_id"`
	Conclusion     string `json:"conclusion"`
	Title          string `json:"title"`
	Summary        string `json:"summary"`
}

// Outbox writes GitHub side effects as outbox rows in the caller's
// transaction. It is the queue's Observer and the webhook intake's feedback
// sink, so no queue change and no delivery outcome commits without its
// GitHub feedback, and none of it is sent before the commit.
type Outbox struct {
	q      *dbq.Queries
	now    func() time.Time
	logger *slog.Logger
	signal func() // after the commit of a transaction that wrote rows
}

// NewOutbox returns an Outbox; now is the clock rows are stamped with.
func NewOutbox(now func() time.Time, logger *slog.Logger) *Outbox {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Outbox{q: dbq.New(), now: now, logger: logger, signal: func() {}}
}

// OutboxChannel is the Postgres channel senders listen on: a NOTIFY on it,
// sent after the commit of a transaction that wrote outbox rows, wakes the
// senders of every process at once rather than at their next poll.
const OutboxChannel = "gitlease_outbox"

// SignalWith makes the outbox call signal after the commit of each
// Store.InTx transaction that wrote rows (queue.AfterCommit): pass a
// service.Notifier on OutboxChannel's Signal. Call it before the outbox is
// used; it returns o.
func (o *Outbox) SignalWith(signal func()) *Outbox {
	o.signal = signal
	return o
}

var (
	_ queue.Observer      = (*Outbox)(nil)
	_ queue.EnqueueFilter = (*Outbox)(nil)
	_ queue.GroupObserver = (*Outbox)(nil)
)

// ObservesEnqueue reports whether Enqueued may write anything for an item
// enqueued with this subject: only a GitHub pull request's may (its queued
// check run, and only when the item comes from a verified delivery, which
// Enqueued checks). It reads the subject's metadata, not the dispatch.
func (o *Outbox) ObservesEnqueue(subject *queue.SubjectRef) bool {
	m, ok := webhook.SubjectMeta(subject)
	return ok && m.Kind == webhook.KindPullRequest && m.HeadSHA != ""
}

func (o *Outbox) insert(ctx context.Context, tx pgx.Tx, lane, kind string, entry *uuid.UUID, traceParent string, payload any) error {
	return o.insertVia(ctx, tx, lane, kind, entry, traceParent, payload)
}

// insertVia is insert through db: tx, or queue.AtCommit(tx) for a row that
// nothing in its transaction reads or orders against before the commit.
// traceParent is the trace the row's send joins: its item's, or its
// delivery's ("" for none).
func (o *Outbox) insertVia(ctx context.Context, db dbq.DBTX, lane, kind string, entry *uuid.UUID, traceParent string, payload any) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("encode outbox %s: %w", kind, err)
	}
	err = o.q.OutboxInsert(ctx, db, dbq.OutboxInsertParams{Lane: lane, Kind: kind, EntryID: entry, Payload: b, Now: o.now(), TraceParent: traceParentParam(traceParent)})
	if err != nil {
		return fmt.Errorf("write outbox %s: %w", kind, err)
	}
	queue.AfterCommit(ctx, o.signal)
	return nil
}

func (o *Outbox) checkRun(ctx context.Context, tx pgx.Tx, it queue.Item, u checkRunUpdate) error {
	return o.checkRunByID(ctx, tx, uuid.MustParse(it.EntryID()), it.TraceParent(), u)
}

// Enqueued creates a pull-request item's check run, queued, on its head
// commit. An issue item's check run waits for its branch. The row goes to
// the database with the transaction's COMMIT (queue.AtCommit): it is the
// first row of the new item's lane, and nothing in the transaction reads it.
func (o *Outbox) Enqueued(ctx context.Context, tx pgx.Tx, it queue.Item) error {
	id, u, ok := queuedCheckRun(it)
	if !ok {
		return nil
	}
	return o.insertVia(ctx, queue.AtCommit(tx), "checks/"+id.String(), kindCheckRun, &id, it.TraceParent(), u)
}

// EnqueuedGroup is Enqueued for a group of new items (queue.GroupObserver):
// their rows in one statement, with the COMMIT.
func (o *Outbox) EnqueuedGroup(ctx context.Context, tx pgx.Tx, items []queue.Item) error {
	var p dbq.OutboxInsertManyParams
	for _, it := range items {
		id, u, ok := queuedCheckRun(it)
		if !ok {
			continue
		}
		b, err := json.Marshal(u)
		if err != nil {
			return fmt.Errorf("encode outbox %s: %w", kindCheckRun, err)
		}
		p.Lanes, p.Kinds = append(p.Lanes, "checks/"+id.String()), append(p.Kinds, kindCheckRun)
		p.EntryIds, p.Payloads = append(p.EntryIds, id), append(p.Payloads, b)
		p.TraceParents = append(p.TraceParents, it.TraceParent())
	}
	if len(p.Lanes) == 0 {
		return nil
	}
	p.Now = o.now()
	if err := o.q.OutboxInsertMany(ctx, queue.AtCommit(tx), p); err != nil {
		return fmt.Errorf("write outbox %s: %w", kindCheckRun, err)
	}
	queue.AfterCommit(ctx, o.signal)
	return nil
}

// queuedCheckRun is the queued check run a new item gets, if it gets one
// now: a pull request's, on its head commit.
func queuedCheckRun(it queue.Item) (uuid.UUID, checkRunUpdate, bool) {
	m, ok := itemMeta(it)
	if !ok || m.Kind != webhook.KindPullRequest || m.HeadSHA == "" {
		return uuid.UUID{}, checkRunUpdate{}, false
	}
	return uuid.MustParse(it.EntryID()), checkRunUpdate{
		Status:  "queued",
		Title:   fmt.Sprintf("Queued: generation %d", it.Generation()),
		Summary: "Queued: waiting for a worker to lease it",
	}, true
}

// Leased moves the check run to in_progress and, for an issue item not yet
// provisioned, asks for its branch and draft pull request.
func (o *Outbox) Leased(ctx context.Context, tx pgx.Tx, it queue.Item) error {
	m, ok := itemMeta(it)
	if !ok {
		return nil
	}
	f := it.Fence()
	if f == nil || f.QueueLease == nil {
		return nil
	}
	if m.Kind == webhook.KindIssue {
		if err := o.askProvisioning(ctx, tx, it, f.QueueLease.Generation); err != nil {
			return err
		}
	}
	return o.checkRun(ctx, tx, it, checkRunUpdate{
		Status:  "in_progress",
		Title:   fmt.Sprintf("In progress: generation %d", it.Generation()),
		Summary: fmt.Sprintf("Running: handed to worker %s (lease generation %d)", f.QueueLease.OwnerID, f.QueueLease.Generation),
	})
}

// askProvisioning asks for an issue item's branch and draft pull request
// for this lease generation, unless an earlier lease already recorded them.
func (o *Outbox) askProvisioning(ctx context.Context, tx pgx.Tx, it queue.Item, leaseGeneration uint64) error {
	id := uuid.MustParse(it.EntryID())
	g, err := itemState(ctx, o.q, tx, id)
	if err != nil || g.Branch != nil {
		return err
	}
	return o.insert(ctx, tx, "provision/"+it.EntryID(), kindProvision, &id, it.TraceParent(),
		provisionRequest{LeaseGeneration: int64(leaseGeneration)})
}

// conclusions maps a terminal outcome onto a check-run conclusion.
var conclusions = map[string]string{
	queue.StatusCompleted: "success",
	queue.StatusFailed:    "failure",
	queue.StatusCancelled: "cancelled",
	queue.StatusDropped:   "cancelled",
}

// Finished concludes the item's check run. An issue item that never got a
// branch never got a check run, and gets none now.
func (o *Outbox) Finished(ctx context.Context, tx pgx.Tx, it queue.Item) error {
	m, ok := itemMeta(it)
	if !ok || (m.Kind == webhook.KindIssue && !it.ProvisionRequested()) {
		return nil
	}
	end, err := queue.ReadEnding(ctx, tx, it.ID())
	if err != nil {
		return err
	}
	conclusion, headline := ending(it, end.Reason)
	return o.checkRun(ctx, tx, it, checkRunUpdate{
		Status:     "completed",
		Conclusion: conclusion,
		Title:      fmt.Sprintf("%s: generation %d", titleOf(it.Status(), conclusion), it.Generation()),
		Summary:    headline,
	})
}

// titleOf names a finished item's outcome in its check run's title: its
// status, or Timed out.
func titleOf(status, conclusion string) string {
	if conclusion == "timed_out" {
		return "Timed out"
	}
	return strings.ToUpper(status[:1]) + status[1:]
}

// ending is a finished item's check-run conclusion and the one line that
// says why, who and how: how it ended, when that was said ("Cancelled
// by @octo with the Cancel button", "Command exited 3"), else what its
// outcome says. A failure whose note starts with queue.NoteTimedOut timed
// out.
func ending(it queue.Item, reason string) (conclusion, headline string) {
	conclusion = conclusions[it.Status()]
	if it.Status() == queue.StatusFailed && strings.HasPrefix(it.Note(), queue.NoteTimedOut) {
		conclusion = "timed_out"
		line, _, _ := strings.Cut(strings.TrimPrefix(it.Note(), "gitlease: "), "\n")
		line, _, _ = strings.Cut(line, ":")
		headline = strings.ToUpper(line[:1]) + line[1:]
	}
	if reason != "" && headline == "" {
		return conclusion, reason
	}
	if headline != "" {
		return conclusion, headline
	}
	return conclusion, map[string]string{
		queue.StatusCompleted: "Completed: the worker finished it successfully",
		queue.StatusFailed:    "Failed: the worker reported a failure",
		queue.StatusCancelled: "Cancelled",
		queue.StatusDropped:   "Dropped: an operator dropped it from the queue, or it expired before a worker took it",
	}[it.Status()]
}

// standalone creates a concluded check run on a commit that is not an
// item's (a colliding pull request's head), once per external ID, in the
// trace traceParent names (the delivery's).
func (o *Outbox) standalone(ctx context.Context, tx pgx.Tx, traceParent string, c standaloneCheckRun) error {
	return o.insert(ctx, tx, "standalone/"+c.ExternalID, kindStandalone, nil, traceParent, c)
}

// itemMeta is where an item lives on GitHub, for an item created from a
// verified delivery only (docs/queue.md): an item enqueued over /rpc or stdio
// gets no GitHub side effect, whatever GitHub metadata its dispatch names.
// An item just enqueued is read from the subject it was enqueued with
// (the same values its dispatch stores), without parsing the ~20 KB
// dispatch back.
func itemMeta(it queue.Item) (webhook.ItemMeta, bool) {
	if !it.FromGitHub() {
		return webhook.ItemMeta{}, false
	}
	if s := it.EnqueuedSubject(); s != nil {
		return webhook.SubjectMeta(s)
	}
	return webhook.ReadMeta(it.Dispatch())
}

// maxNoteBytes is the most of a worker's note a check run summary quotes:
// with the summary's own sentences it stays under GitHub's 65,535 bytes,
// which GitHub enforces by refusing the whole update.
const maxNoteBytes = 60000

// noteText renders a worker's output tail for a check run's details. A
// note over maxNoteBytes is cut to its last bytes, on a UTF-8 boundary,
// saying so: the end of the output is what explains how it ended.
func noteText(note string) string {
	if note == "" {
		return ""
	}
	intro := "\n\nThe worker's output ended with:\n\n```\n"
	if len(note) > maxNoteBytes {
		cut := len(note) - maxNoteBytes
		for cut < len(note) && !utf8.RuneStart(note[cut]) {
			cut++
		}
		intro = fmt.Sprintf("\n\nThe worker's output was cut to its last %d bytes (%d earlier bytes omitted); it ended with:\n\n```\n",
			len(note)-cut, cut)
		note = note[cut:]
	}
	return intro + note + "\n```"
}

// traceParentParam is a trace_parent column value: NULL for none.
func traceParentParam(tp string) *string {
	if tp == "" {
		return nil
	}
	return &tp
}
