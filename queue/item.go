package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
)

// Statuses of a work item. The first three are live; the rest are terminal
// outcomes, kept as history.
const (
	StatusPending   = "pending"
	StatusAssigned  = "assigned"
	StatusHeld      = "held"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
	StatusDropped   = "dropped"
)

// IsTerminal reports whether status is a finished item's outcome.
func IsTerminal(status string) bool {
	switch status {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusDropped:
		return true
	}
	return false
}

// Item is one work item as stored, live or finished. An item the Store has
// just created also carries the subject it was enqueued with, so an Observer
// can decide from those values instead of parsing the stored dispatch back.
type Item struct {
	row     dbq.WorkItem
	subject *SubjectRef
}

// EnqueuedSubject is the subject the item was enqueued with, for the item
// handed to Observer.Enqueued; nil for an item read back from the database.
// It is the same value the stored dispatch's subject holds.
func (it Item) EnqueuedSubject() *SubjectRef { return it.subject }

// TraceParent is the W3C traceparent of the trace the item belongs to
// ("" when it was enqueued without one).
func (it Item) TraceParent() string { return dbq.Deref(it.row.TraceParent) }

// EntryID is the item's UUID.
func (it Item) EntryID() string { return it.row.ID.String() }

// ID is EntryID as a UUID.
func (it Item) ID() uuid.UUID { return it.row.ID }

// ReadItem reads the item with id through db (the caller's transaction or
// a pool), live or finished, for the packages that act on items without a
// Store (the GitHub outbox): they read work_items only through it. It
// returns ErrNotFound when there is none.
func ReadItem(ctx context.Context, db dbq.DBTX, id uuid.UUID) (Item, error) {
	w, err := dbq.New().WorkItemGet(ctx, db, id)
	if err != nil {
		return Item{}, interpretError("read work item", err)
	}
	return Item{row: w}, nil
}

// Status is the item's state or, once finished, its terminal outcome.
func (it Item) Status() string { return it.row.Status }

// QualifiedID is the canonical subject ID ("" for a legacy item without one).
func (it Item) QualifiedID() string { return dbq.Deref(it.row.CanonicalID) }

// Generation is the subject generation (0 for a legacy item without one).
func (it Item) Generation() uint64 { return uint64(dbq.Deref(it.row.SubjectGeneration)) }

// Dispatch is the stored dispatch JSON.
func (it Item) Dispatch() json.RawMessage { return json.RawMessage(it.row.Dispatch) }

// Reservation is the item's repository reservation, or nil.
func (it Item) Reservation() *Reservation {
	if it.row.Repository == nil {
		return nil
	}
	return &Reservation{Repository: *it.row.Repository, BaseRef: dbq.Deref(it.row.BaseRef), HeadRef: dbq.Deref(it.row.HeadRef)}
}

// Fence is the item's current execution fence, or nil before its first v2
// hand-out.
func (it Item) Fence() *Fence { return fenceOf(it.row) }

// Entry is the item in its QueueEntry wire form.
func (it Item) Entry() Entry { return entryOf(it.row) }

// ProvisionRequested reports whether the item was ever handed out, which
// (for an issue item) is when its branch and pull request are asked for.
func (it Item) ProvisionRequested() bool { return it.row.LeaseGeneration > 0 }

// LeaseGeneration counts the item's v2 hand-outs: 0 before the first, and
// each lease after it has a larger one.
func (it Item) LeaseGeneration() uint64 { return uint64(it.row.LeaseGeneration) }

// Provisioning is what GitHub holds for the item, once known.
type Provisioning struct {
	Branch            string `json:"branch,omitempty"`
	HeadSHA           string `json:"head_sha,omitempty"`
	PullRequestNumber int    `json:"pull_request_number,omitempty"`
	PullRequestURL    string `json:"pull_request_url,omitempty"`
}

// Note is what the worker said when it finished, if anything.
func (it Item) Note() string { return dbq.Deref(it.row.ResultNote) }

// AssignedAt is when the item's current (or last) lease began; zero when
// it was never assigned.
func (it Item) AssignedAt() time.Time {
	if it.row.AssignedAt == nil {
		return time.Time{}
	}
	return *it.row.AssignedAt
}

// FinishedAt is when the item reached its terminal outcome; zero while it
// is live.
func (it Item) FinishedAt() time.Time {
	if it.row.FinishedAt == nil {
		return time.Time{}
	}
	return *it.row.FinishedAt
}

// Item sources, stored in work_items.source: SourceGitHub for an item the
// webhook intake created from a verified delivery, SourceRPC for every
// other.
const (
	SourceRPC    = "rpc"
	SourceGitHub = "github"
)

// FromGitHub reports whether the webhook intake created the item from a
// verified delivery (EnqueueParams.FromGitHub). Only such items get check
// runs, branches, pull requests and an installation token; an item enqueued
// over /rpc or stdio is a queue item only, whatever its dispatch names.
func (it Item) FromGitHub() bool { return it.row.Source == SourceGitHub }

// IdempotencyKey is the key bound to the item, or "".
func (it Item) IdempotencyKey() string { return dbq.Deref(it.row.IdempotencyKey) }

func entryOf(w dbq.WorkItem) Entry {
	e := Entry{
		EntryID:         w.ID.String(),
		SubjectID:       w.SubjectID,
		SubjectDispatch: json.RawMessage(w.Dispatch),
		Status:          w.Status,
		TaskID:          dbq.Deref(w.TaskID),
		WorkflowID:      dbq.Deref(w.WorkflowID),
		EnqueuedAt:      EntryTime{w.EnqueuedAt},
		RunAt:           dbq.Deref(w.RunAt),
		TraceParent:     dbq.Deref(w.TraceParent),
	}
	if w.AssignedAt != nil {
		e.AssignedAt = &EntryTime{*w.AssignedAt}
	}
	if w.HeldAt != nil {
		e.HeldAt = &EntryTime{*w.HeldAt}
	}
	if w.ExpireAfterSecs != nil {
		n := uint64(*w.ExpireAfterSecs)
		e.ExpireAfterSecs = &n
	}
	return e
}

// fenceOf builds the fence a v2 hand-out issued for w; nil if it has none.
func fenceOf(w dbq.WorkItem) *Fence {
	if w.LeaseGeneration == 0 || w.WorkflowID == nil || w.LeaseOwner == nil || w.LeaseExpiresAt == nil {
		return nil
	}
	f := &Fence{
		Schema:             FenceSchema,
		Version:            FenceVersion,
		WorkflowID:         *w.WorkflowID,
		WorkflowGeneration: uint64(dbq.Deref(w.WorkflowGeneration)),
		QueueLease: &LeaseFence{
			EntryID:    w.ID.String(),
			OwnerID:    *w.LeaseOwner,
			Generation: uint64(w.LeaseGeneration),
			ExpiresAt:  FenceTime{*w.LeaseExpiresAt},
		},
	}
	if w.CanonicalID != nil && w.SubjectGeneration != nil {
		f.Subject = &SubjectGeneration{QualifiedID: *w.CanonicalID, Generation: uint64(*w.SubjectGeneration)}
	}
	if w.Repository != nil {
		f.Repository = &Reservation{Repository: *w.Repository, BaseRef: dbq.Deref(w.BaseRef), HeadRef: dbq.Deref(w.HeadRef)}
	}
	return f
}

// View is an item as gitlease/entry/get shows it: any item, finished ones
// included, with its status or terminal outcome.
type View struct {
	EntryID        string        `json:"entry_id"`
	QualifiedID    string        `json:"qualified_id"`
	Generation     uint64        `json:"generation"`
	Status         string        `json:"status"`
	EnqueuedAt     EntryTime     `json:"enqueued_at"`
	FinishedAt     *EntryTime    `json:"finished_at,omitempty"`
	IdempotencyKey string        `json:"idempotency_key,omitempty"`
	WorkflowID     string        `json:"workflow_id,omitempty"`
	Execution      *Fence        `json:"execution,omitempty"`
	Repository     *Reservation  `json:"repository,omitempty"`
	Provisioning   *Provisioning `json:"provisioning,omitempty"`
	CheckRunID     int64         `json:"check_run_id,omitempty"`
	// FromGitHub says whether the item came from a verified delivery, so
	// gitlease provisions its branch and writes its check run (SPEC §7);
	// false for an item enqueued over /rpc or stdio, which is a queue item
	// only, whatever its subject. gitlease always sends it; nil is an
	// older server's answer, which does not say.
	FromGitHub *bool `json:"from_github,omitempty"`
}

// View returns the item's gitlease/entry/get form, without what only the
// GitHub side knows (see Store.View).
func (it Item) View() View {
	v := View{
		EntryID:        it.EntryID(),
		QualifiedID:    it.QualifiedID(),
		Generation:     it.Generation(),
		Status:         it.row.Status,
		EnqueuedAt:     EntryTime{it.row.EnqueuedAt},
		IdempotencyKey: it.IdempotencyKey(),
		WorkflowID:     dbq.Deref(it.row.WorkflowID),
		Execution:      it.Fence(),
		Repository:     it.Reservation(),
		FromGitHub:     new(it.FromGitHub()),
	}
	if it.row.FinishedAt != nil {
		v.FinishedAt = &EntryTime{*it.row.FinishedAt}
	}
	return v
}

// optional is s as a nullable column: nil when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Ending is how an item ended, when that was said: Reason in one line, who
// cancelled it and how ("Cancelled by @octo with the Cancel button") or
// what its command did ("Command exited 3"); ExitCode the exit status of
// the built-in worker's command, when one ran to its end. An assigned item
// asked to stop already has its Reason.
type Ending struct {
	Reason   string
	ExitCode *int
}

// ReadEnding reads how item id ended through db (the zero Ending when
// nothing was said), for its check run's summary.
func ReadEnding(ctx context.Context, db dbq.DBTX, id uuid.UUID) (Ending, error) {
	row, err := dbq.New().WorkItemEndingGet(ctx, db, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Ending{}, nil
	}
	if err != nil {
		return Ending{}, fmt.Errorf("read how queue entry %s ended: %w", id, err)
	}
	e := Ending{Reason: dbq.Deref(row.EndReason)}
	if row.ExitCode != nil {
		code := int(*row.ExitCode)
		e.ExitCode = &code
	}
	return e, nil
}
