package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
)

// The fenced operations, for classifying a compare-and-swap that missed.
type fencedOp int

const (
	opRenew fencedOp = iota
	opRecover
	opComplete
	opReleasePending
)

// Reasons carried by mutation results, worded as the reference words them.
const (
	reasonStale   = "execution fence does not own this queue lease"
	reasonExpired = "queue lease has expired and requires recovery"
)

// ReasonSubjectClosed is the reason a renew gives (outcome not_assigned)
// when the item's subject was closed while it ran: the item has finished
// cancelled and its owner should stop.
const ReasonSubjectClosed = "queue entry was cancelled: its subject was closed"

var errSubjectClosed = errors.New(ReasonSubjectClosed)

// NoteTimedOut starts the note of an item that failed because its command
// ran past GITLEASE_WORKER_TIMEOUT: its check run concludes timed_out.
const NoteTimedOut = "gitlease: timed out"

// RenewParams extends a live lease (QueueLeaseRenewRequest).
type RenewParams struct {
	Execution Fence
	// TTLSecs, if set, is the requested extension, capped at the lease TTL.
	TTLSecs *uint64
}

// RecoverParams moves an expired lease to a new owner (QueueLeaseRecoverRequest).
type RecoverParams struct {
	Execution  Fence // the dead owner's last fence
	NewOwnerID string
	TTLSecs    *uint64
}

// CompleteParams finishes a leased item (QueueCompletionV2Request).
type CompleteParams struct {
	Execution Fence
	Status    string // completed, failed or cancelled
	// Note, if set, is kept with the outcome (the built-in worker's output
	// tail, shown in the check run). It is not part of the wire protocol.
	Note string
	// EndReason, if set, says in one line how it ended ("Command exited
	// 3"); an item asked to stop keeps the reason it was cancelled with.
	// ExitCode is the command's exit status, when one ran to its end.
	// Neither is part of the wire protocol.
	EndReason string
	ExitCode  *int
}

// ReleasePendingParams returns a leased item to pending (QueueReleasePendingV2Request).
type ReleasePendingParams struct {
	Execution Fence
	Reason    string
}

// ttl is the lease extension a renew or recover asks for, capped at the TTL.
func (s *Store) ttl(secs *uint64) (time.Duration, error) {
	if secs == nil {
		return s.cfg.LeaseTTL, nil
	}
	if *secs == 0 {
		return 0, invalidf("lease renewal ttl_secs must be greater than zero")
	}
	if d := time.Duration(*secs) * time.Second; *secs < uint64(s.cfg.LeaseTTL/time.Second) && d < s.cfg.LeaseTTL {
		return d, nil
	}
	return s.cfg.LeaseTTL, nil
}

// fenceArgs are the fence columns every compare-and-swap query takes.
type fenceArgs struct {
	id                                uuid.UUID
	workflowID, qualifiedID, ownerID  string
	workflowGen, subjectGen, leaseGen int64
	repository, baseRef, headRef      *string
}

// argsOf maps a validated queue-backed fence onto query arguments. ok is false
// when the fence cannot match any stored item (no subject, or an entry ID that
// is not a UUID); the caller then only classifies.
func argsOf(f Fence) (a fenceArgs, ok bool) {
	id, err := uuid.Parse(f.QueueLease.EntryID)
	if err != nil || f.Subject == nil {
		return a, false
	}
	a = fenceArgs{
		id: id, workflowID: f.WorkflowID, qualifiedID: f.Subject.QualifiedID, ownerID: f.QueueLease.OwnerID,
		workflowGen: int64(f.WorkflowGeneration), subjectGen: int64(f.Subject.Generation),
		leaseGen: int64(f.QueueLease.Generation),
	}
	if r := f.Repository; r != nil {
		a.repository, a.baseRef, a.headRef = &r.Repository, &r.BaseRef, &r.HeadRef
	}
	return a, true
}

// Renew extends a live lease to max(expiry, now + min(ttl, TTL)), keeping its
// generation. A lease that has expired is not renewed (outcome stale_fence):
// it needs Recover. Fence problems are outcomes, not errors; it returns
// *InvalidError for a malformed request.
func (s *Store) Renew(ctx context.Context, p RenewParams) (_ MutationResult, err error) {
	defer s.timed("renew", time.Now(), &err)
	if err := p.Execution.Validate(true); err != nil {
		return MutationResult{}, err
	}
	ttl, err := s.ttl(p.TTLSecs)
	if err != nil {
		return MutationResult{}, err
	}
	return s.fenced(ctx, opRenew, p.Execution, func(tx pgx.Tx, now time.Time, a fenceArgs) (dbq.WorkItem, error) {
		w, err := s.q.WorkItemRenew(ctx, tx, dbq.WorkItemRenewParams{
			NewExpiresAt: now.Add(ttl), ID: a.id, Now: now,
			WorkflowID: a.workflowID, WorkflowGeneration: a.workflowGen, QualifiedID: a.qualifiedID,
			SubjectGeneration: a.subjectGen, OwnerID: a.ownerID, LeaseGeneration: a.leaseGen,
			Repository: a.repository, BaseRef: a.baseRef, HeadRef: a.headRef,
		})
		if !errors.Is(err, pgx.ErrNoRows) {
			return w, err
		}
		// The subject may have been closed: the owner learns it here, and
		// the item finishes cancelled.
		cw, cerr := s.q.WorkItemFinishCancelled(ctx, tx, dbq.WorkItemFinishCancelledParams{
			Now: now, ID: a.id,
			WorkflowID: a.workflowID, WorkflowGeneration: a.workflowGen, QualifiedID: a.qualifiedID,
			SubjectGeneration: a.subjectGen, OwnerID: a.ownerID, LeaseGeneration: a.leaseGen,
			Repository: a.repository, BaseRef: a.baseRef, HeadRef: a.headRef,
		})
		if cerr == nil {
			if err := s.cfg.Observer.Finished(ctx, tx, Item{row: cw}); err != nil {
				return w, fmt.Errorf("observe cancel: %w", err)
			}
			return w, errSubjectClosed
		}
		return w, err
	})
}

// Recover moves an expired lease to p.NewOwnerID with the next lease
// generation and a fresh expiry; workflow and subject generation never change,
// so the old owner's fence is stale from then on. A live lease is left alone
// (outcome lease_still_live, with its current fence). It returns *InvalidError
// for a malformed request or a new owner equal to the old one.
func (s *Store) Recover(ctx context.Context, p RecoverParams) (_ MutationResult, err error) {
	defer s.timed("recover", time.Now(), &err)
	if err := p.Execution.Validate(true); err != nil {
		return MutationResult{}, err
	}
	newOwner := strings.TrimSpace(p.NewOwnerID)
	if newOwner == "" || newOwner == p.Execution.QueueLease.OwnerID {
		return MutationResult{}, invalidf("lease recovery must transfer to a different owner_id")
	}
	ttl, err := s.ttl(p.TTLSecs)
	if err != nil {
		return MutationResult{}, err
	}
	return s.fenced(ctx, opRecover, p.Execution, func(tx pgx.Tx, now time.Time, a fenceArgs) (dbq.WorkItem, error) {
		return s.q.WorkItemRecover(ctx, tx, dbq.WorkItemRecoverParams{
			NewOwnerID: newOwner, NewExpiresAt: now.Add(ttl), ID: a.id, Now: now,
			WorkflowID: a.workflowID, WorkflowGeneration: a.workflowGen, QualifiedID: a.qualifiedID,
			SubjectGeneration: a.subjectGen, OwnerID: a.ownerID, LeaseGeneration: a.leaseGen,
			Repository: a.repository, BaseRef: a.baseRef, HeadRef: a.headRef,
		})
	})
}

// Complete finishes a leased item with outcome p.Status. It does not check
// the expiry: an expired lease nobody recovered may still finish. Repeating a
// completion with the same fence answers already_applied and the first
// outcome stands. It returns *InvalidError for a malformed request.
func (s *Store) Complete(ctx context.Context, p CompleteParams) (_ MutationResult, err error) {
	defer s.timed("complete", time.Now(), &err)
	if err := p.Execution.Validate(true); err != nil {
		return MutationResult{}, err
	}
	switch p.Status {
	case StatusCompleted, StatusFailed, StatusCancelled:
	default:
		return MutationResult{}, invalidf("completion status must be completed, failed or cancelled, not %q", p.Status)
	}
	return s.fenced(ctx, opComplete, p.Execution, func(tx pgx.Tx, now time.Time, a fenceArgs) (_ dbq.WorkItem, err error) {
		if p.EndReason != "" || p.ExitCode != nil {
			defer func() {
				if err == nil {
					err = s.ended(ctx, tx, a.id, p.EndReason, p.ExitCode)
				}
			}()
		}
		return s.q.WorkItemComplete(ctx, tx, dbq.WorkItemCompleteParams{
			Status: p.Status, Now: now, ID: a.id, Note: optional(p.Note),
			WorkflowID: a.workflowID, WorkflowGeneration: a.workflowGen, QualifiedID: a.qualifiedID,
			SubjectGeneration: a.subjectGen, OwnerID: a.ownerID, LeaseGeneration: a.leaseGen,
			Repository: a.repository, BaseRef: a.baseRef, HeadRef: a.headRef,
		})
	})
}

// ReleasePending returns a leased item to pending, keeping its workflow,
// generations and lease counters, so the next hand-out resumes the same
// workflow one lease generation up. The reason goes into the item's audit
// log. A retry after success answers already_applied. It returns
// *InvalidError for a malformed request.
func (s *Store) ReleasePending(ctx context.Context, p ReleasePendingParams) (_ MutationResult, err error) {
	defer s.timed("release_pending", time.Now(), &err)
	if err := p.Execution.Validate(true); err != nil {
		return MutationResult{}, err
	}
	reason := strings.TrimSpace(p.Reason)
	if reason == "" {
		return MutationResult{}, invalidf("release_pending reason must not be blank")
	}
	res, err := s.fenced(ctx, opReleasePending, p.Execution, func(tx pgx.Tx, now time.Time, a fenceArgs) (w dbq.WorkItem, err error) {
		if w, err = s.q.WorkItemReleasePending(ctx, tx, dbq.WorkItemReleasePendingParams{
			ID:         a.id,
			WorkflowID: a.workflowID, WorkflowGeneration: a.workflowGen, QualifiedID: a.qualifiedID,
			SubjectGeneration: a.subjectGen, OwnerID: a.ownerID, LeaseGeneration: a.leaseGen,
			Repository: a.repository, BaseRef: a.baseRef, HeadRef: a.headRef,
		}); err != nil {
			return w, err
		}
		return w, s.audit(ctx, tx, w.ID, now, "queue/v2/release_pending", StatusAssigned, StatusPending, reason)
	})
	res.Execution = nil // release_pending answers without a fence
	if err == nil && res.Outcome == OutcomeApplied {
		s.cfg.OnPending()
	}
	return res, err
}

// fenced runs one compare-and-swap in a transaction and tells the Observer
// what it changed; when it takes no row, the stored item decides the
// outcome. A row that changed between the two is tried again.
func (s *Store) fenced(ctx context.Context, op fencedOp, f Fence, cas func(pgx.Tx, time.Time, fenceArgs) (dbq.WorkItem, error)) (MutationResult, error) {
	a, matchable := argsOf(f)
	for attempt := 0; ; attempt++ {
		now := s.now()
		if matchable {
			var w dbq.WorkItem
			closed := false
			err := s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) (err error) {
				w, err = cas(tx, now, a)
				if errors.Is(err, errSubjectClosed) {
					closed = true // the item finished cancelled: commit that
					return nil
				} else if err != nil {
					return err
				}
				return s.observe(ctx, tx, op, w)
			})
			switch {
			case err == nil && closed:
				return MutationResult{Outcome: OutcomeNotAssigned, Reason: ReasonSubjectClosed}, nil
			case err == nil:
				return MutationResult{Outcome: OutcomeApplied, Execution: fenceOf(w)}, nil
			case !errors.Is(err, pgx.ErrNoRows):
				return MutationResult{}, fmt.Errorf("fenced update: %w", err)
			}
		}
		var row *dbq.WorkItem
		if id, err := uuid.Parse(f.QueueLease.EntryID); err == nil {
			w, err := s.q.WorkItemGet(ctx, s.pool, id)
			switch {
			case err == nil:
				row = &w
			case !errors.Is(err, pgx.ErrNoRows):
				return MutationResult{}, fmt.Errorf("read work item: %w", err)
			}
		}
		if res, ok := classify(op, f, row, now); ok || attempt >= maxConflictRetries {
			return res, nil
		}
	}
}

// observe tells the Observer what an applied fenced mutation did.
func (s *Store) observe(ctx context.Context, tx pgx.Tx, op fencedOp, w dbq.WorkItem) error {
	var err error
	switch op {
	case opRecover:
		err = s.cfg.Observer.Leased(ctx, tx, Item{row: w})
	case opComplete:
		err = s.cfg.Observer.Finished(ctx, tx, Item{row: w})
	}
	if err != nil {
		return fmt.Errorf("observe mutation: %w", err)
	}
	return nil
}

// classify decides a fenced call the compare-and-swap did not apply, by the
// decision table of queue v2 §3.5. ok is false when the row would have been
// applied after all (it changed in between): the caller tries again.
func classify(op fencedOp, f Fence, w *dbq.WorkItem, now time.Time) (res MutationResult, ok bool) {
	switch {
	case w == nil:
		return MutationResult{Outcome: OutcomeNotFound}, true
	case IsTerminal(w.Status):
		if op == opComplete && w.Status != StatusDropped && exactMatch(f, *w) {
			return MutationResult{Outcome: OutcomeAlreadyApplied, Execution: fenceOf(*w)}, true
		}
		reason := "queue entry is done"
		if w.Status == StatusDropped {
			reason = "queue entry is dropped"
		}
		return MutationResult{Outcome: OutcomeNotAssigned, Reason: reason}, true
	case op == opReleasePending && w.Status == StatusPending && exactMatch(f, *w):
		return MutationResult{Outcome: OutcomeAlreadyApplied}, true
	case w.Status != StatusAssigned:
		return MutationResult{Outcome: OutcomeNotAssigned, Reason: "queue entry is " + w.Status}, true
	case !exactMatch(f, *w):
		return MutationResult{Outcome: OutcomeStaleFence, Reason: reasonStale}, true
	}
	live := w.LeaseExpiresAt != nil && w.LeaseExpiresAt.After(now)
	switch {
	case op == opRenew && !live:
		return MutationResult{Outcome: OutcomeStaleFence, Reason: reasonExpired}, true
	case op == opRecover && live:
		return MutationResult{Outcome: OutcomeLeaseStillLive, Execution: fenceOf(*w)}, true
	}
	return MutationResult{}, false
}

// Validate checks f as an ExecutionFence (queue v2 §2.2). With queueBacked it
// also requires the queue lease, as renew, recover, completion and
// release_pending do.
func (f Fence) Validate(queueBacked bool) error {
	switch {
	case f.Schema != FenceSchema:
		return invalidf("execution fence schema must be %q", FenceSchema)
	case f.Version != FenceVersion:
		return invalidf("execution fence version must be %d", FenceVersion)
	case strings.TrimSpace(f.WorkflowID) == "":
		return invalidf("execution fence workflow_id must not be blank")
	case f.WorkflowGeneration < 1:
		return invalidf("execution fence workflow_generation must be at least 1")
	}
	if s := f.Subject; s != nil {
		if _, _, ok := SplitQualifiedID(s.QualifiedID); !ok {
			return invalidf("execution fence subject.qualified_id %q must be <kind>:<id>", s.QualifiedID)
		}
		if s.Generation < 1 {
			return invalidf("execution fence subject.generation must be at least 1")
		}
	}
	if l := f.QueueLease; l != nil {
		switch {
		case strings.TrimSpace(l.EntryID) == "" || strings.TrimSpace(l.OwnerID) == "":
			return invalidf("execution fence queue_lease needs entry_id and owner_id")
		case l.Generation < 1:
			return invalidf("execution fence queue_lease.generation must be at least 1")
		}
	} else if queueBacked {
		return invalidf("execution fence is not queue-backed: queue_lease is required")
	}
	if r := f.Repository; r != nil {
		if err := ValidateReservation(*r); err != nil {
			return err
		}
	}
	return nil
}

// exactMatch is the compare-and-swap of every fenced mutation, in Go, for
// classifying a row the SQL compare-and-swap (work_item_fence_matches) did not
// take. Both must agree; expires_at is never compared.
func exactMatch(f Fence, w dbq.WorkItem) bool {
	if f.Subject == nil || f.QueueLease == nil || w.SubjectGeneration == nil || w.LeaseOwner == nil {
		return false
	}
	if f.WorkflowID != dbq.Deref(w.WorkflowID) || int64(f.WorkflowGeneration) != dbq.Deref(w.WorkflowGeneration) ||
		f.Subject.QualifiedID != dbq.Deref(w.CanonicalID) || int64(f.Subject.Generation) != *w.SubjectGeneration ||
		f.QueueLease.EntryID != w.ID.String() || f.QueueLease.OwnerID != *w.LeaseOwner ||
		int64(f.QueueLease.Generation) != w.LeaseGeneration {
		return false
	}
	if f.Repository == nil || w.Repository == nil {
		return f.Repository == nil && w.Repository == nil
	}
	return strings.EqualFold(f.Repository.Repository, *w.Repository) &&
		f.Repository.BaseRef == dbq.Deref(w.BaseRef) && f.Repository.HeadRef == dbq.Deref(w.HeadRef)
}

// ended records how item id ended, in tx: a reason given before (a
// cancel's) stays.
func (s *Store) ended(ctx context.Context, tx pgx.Tx, id uuid.UUID, reason string, exitCode *int) error {
	var exit *int32
	if exitCode != nil {
		v := int32(*exitCode)
		exit = &v
	}
	if err := s.q.WorkItemEndingSet(ctx, tx, dbq.WorkItemEndingSetParams{EntryIds: []uuid.UUID{id}, EndReason: optional(reason), ExitCode: exit}); err != nil {
		return fmt.Errorf("record how queue entry %s ended: %w", id, err)
	}
	return nil
}
