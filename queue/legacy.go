package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
)

// The legacy (pre-v2) queue methods. They fail closed on v2 items with
// *StaleFenceError, so nothing can bypass a generation-fenced lease.

// StaleFenceError is returned when a legacy method would touch a v2 item
// (QUEUE_STALE_FENCE). Nothing was changed.
type StaleFenceError struct {
	Method      string
	EntryID     string
	QualifiedID string
	Generation  uint64
	Status      string
}

func (e *StaleFenceError) Error() string {
	return fmt.Sprintf("queue entry %s is owned by a generation-fenced lease; use queue/v2/*", e.EntryID)
}

func staleFence(method string, w dbq.WorkItem) *StaleFenceError {
	return &StaleFenceError{Method: method, EntryID: w.ID.String(), QualifiedID: dbq.Deref(w.CanonicalID),
		Generation: uint64(dbq.Deref(w.SubjectGeneration)), Status: w.Status}
}

// NotAssignedError is returned by LegacyReleasePending for an item that is
// not assigned (QUEUE_ENTRY_NOT_ASSIGNED).
type NotAssignedError struct{ ActualState string }

func (e *NotAssignedError) Error() string {
	return "queue entry is not assigned (it is " + e.ActualState + ")"
}

// WorkflowIDCountError is returned by LegacyLease when workflow_ids does not
// have max items (QUEUE_LEASE_WORKFLOW_ID_COUNT_MISMATCH).
type WorkflowIDCountError struct{ Expected, Actual int }

func (e *WorkflowIDCountError) Error() string {
	return fmt.Sprintf("queue lease expected %d workflow_ids, got %d", e.Expected, e.Actual)
}

// isV2 reports whether w is under generation-fenced leases.
func isV2(w dbq.WorkItem) bool { return w.IsV2 || w.SubjectGeneration != nil }

// LegacyEnqueueResult is the answer of queue/enqueue.
type LegacyEnqueueResult struct {
	Enqueued  bool   `json:"enqueued"`
	EntryID   string `json:"entry_id"`
	SubjectID string `json:"subject_id"`
	Warning   string `json:"warning,omitempty"`
}

// LegacyEnqueue always creates a new legacy item for d, warning when its
// subject already has live items. It returns *StaleFenceError when a live v2
// item has the same subject.
func (s *Store) LegacyEnqueue(ctx context.Context, d SubjectDispatch, runAt string, expireAfterSecs *uint64) (LegacyEnqueueResult, error) {
	if d.Subject == nil {
		return LegacyEnqueueResult{}, invalidf("queue subject identity is missing")
	}
	var pe preparedEnqueue
	if err := pe.schedule(runAt, expireAfterSecs, false); err != nil {
		return LegacyEnqueueResult{}, err
	}
	dispatch, err := json.Marshal(d)
	if err != nil {
		return LegacyEnqueueResult{}, fmt.Errorf("encode dispatch: %w", err)
	}
	key := legacyKey(d.Subject.Kind, d.Subject.ID)
	ins := dbq.WorkItemInsertParams{
		ID: s.cfg.NewID(), SubjectID: key, Dispatch: dispatch,
		RunAt: pe.runAt, RunAtTime: pe.runAtTime, ExpireAfterSecs: pe.expireAfter, ExpiresAfter: pe.expiresAt,
	}
	if cid, err := CanonicalID(d.Subject.Kind, d.Subject.ID); err == nil {
		ins.CanonicalID = &cid
	}
	if t := TaskID(d.Subject.Kind, d.Subject.ID); t != "" {
		ins.TaskID = &t
	}
	var res LegacyEnqueueResult
	err = s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		now := s.now()
		if err := s.sweep(ctx, tx, now); err != nil {
			return err
		}
		if ins.CanonicalID != nil {
			switch live, err := s.q.WorkItemLiveBySubject(ctx, tx, *ins.CanonicalID); {
			case err == nil && isV2(live):
				return staleFence("queue/enqueue", live)
			case err != nil && !errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("look up live subject: %w", err)
			}
		}
		n, err := s.q.WorkItemCountLiveBySubjectID(ctx, tx, key)
		if err != nil {
			return fmt.Errorf("count live entries: %w", err)
		}
		ins.EnqueuedAt = now
		row, err := s.q.WorkItemInsert(ctx, tx, ins)
		if err != nil {
			return fmt.Errorf("insert work item: %w", err)
		}
		res = LegacyEnqueueResult{Enqueued: true, EntryID: row.ID.String(), SubjectID: key}
		if n > 0 {
			noun := "entries"
			if n == 1 {
				noun = "entry"
			}
			res.Warning = fmt.Sprintf("subject %s already has %d queued %s; duplicate enqueued", key, n, noun)
		}
		return nil
	})
	if err == nil {
		s.cfg.OnPending()
	}
	return res, err
}

// LegacyLease hands out up to max legacy items (due pending ones, and
// assigned ones whose lease expired), one per legacy subject key. It returns
// *StaleFenceError, leasing nothing, while any v2 item is due.
func (s *Store) LegacyLease(ctx context.Context, max int, workflowIDs []string, excludeSubjects []string) ([]Entry, error) {
	if workflowIDs != nil && len(workflowIDs) != max {
		return nil, &WorkflowIDCountError{Expected: max, Actual: len(workflowIDs)}
	}
	leased := []Entry{}
	if max <= 0 {
		return leased, nil
	}
	err := s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		leased = leased[:0]
		now := s.now()
		if err := s.sweep(ctx, tx, now); err != nil {
			return err
		}
		switch v2, err := s.q.WorkItemFirstDueV2(ctx, tx, now); {
		case err == nil:
			return staleFence("queue/lease", v2)
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("look for due v2 entries: %w", err)
		}
		cands, err := s.q.WorkItemLegacyLeaseCandidates(ctx, tx, dbq.WorkItemLegacyLeaseCandidatesParams{Now: now, Scan: int32(scanSize(max))})
		if err != nil {
			return fmt.Errorf("scan legacy candidates: %w", err)
		}
		skip := map[string]bool{}
		for _, k := range excludeSubjects {
			skip[k] = true
		}
		for _, c := range cands {
			if len(leased) == max {
				break
			}
			if skip[c.SubjectID] {
				continue
			}
			skip[c.SubjectID] = true
			wf := dbq.Deref(c.WorkflowID)
			if wf == "" && workflowIDs != nil {
				wf = workflowIDs[len(leased)]
			}
			if wf == "" {
				wf = uuid.NewString()
			}
			w, err := s.q.WorkItemLegacyAssign(ctx, tx, dbq.WorkItemLegacyAssignParams{
				ID: c.ID, WorkflowID: wf, Now: now, LeaseExpiresAt: new(now.Add(s.cfg.LeaseTTL)),
			})
			if err != nil {
				return fmt.Errorf("assign legacy entry: %w", err)
			}
			leased = append(leased, entryOf(w))
		}
		return nil
	})
	return leased, err
}

// MarkAssigned marks a pending legacy item assigned. An assigned one is left
// alone (Changed false), a held one is *NotPendingError, a v2 one
// *StaleFenceError; an unknown one is NotFound.
func (s *Store) MarkAssigned(ctx context.Context, entryID, workflowID string) (Change, error) {
	var ch Change
	err := s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		w, err := s.lockLive(ctx, tx, entryID)
		if errors.Is(err, ErrNotFound) {
			ch = Change{NotFound: true}
			return nil
		} else if err != nil {
			return err
		}
		switch {
		case isV2(w):
			return staleFence("queue/mark_assigned", w)
		case w.Status == StatusAssigned:
			return nil
		case w.Status == StatusHeld:
			return &NotPendingError{EntryID: entryID}
		}
		if strings.TrimSpace(workflowID) == "" {
			workflowID = uuid.NewString()
		}
		now := s.now()
		if _, err := s.q.WorkItemLegacyAssign(ctx, tx, dbq.WorkItemLegacyAssignParams{
			ID: w.ID, WorkflowID: workflowID, Now: now, LeaseExpiresAt: new(now.Add(s.cfg.LeaseTTL)),
		}); err != nil {
			return fmt.Errorf("assign legacy entry: %w", err)
		}
		ch.Changed = true
		return nil
	})
	return ch, err
}

// lockLive reads an item for update; ErrNotFound when unknown or finished.
func (s *Store) lockLive(ctx context.Context, tx pgx.Tx, entryID string) (dbq.WorkItem, error) {
	id, err := uuid.Parse(entryID)
	if err != nil {
		return dbq.WorkItem{}, ErrNotFound
	}
	w, err := s.q.WorkItemGetForUpdate(ctx, tx, id)
	if err != nil {
		return w, interpretError("lock work item", err)
	}
	if IsTerminal(w.Status) {
		return w, ErrNotFound
	}
	return w, nil
}

// LegacyReleasePending returns an assigned legacy item to pending, clearing
// its workflow and lease. It returns *InvalidError for an unknown item,
// *StaleFenceError for a v2 one and *NotAssignedError when it is not assigned.
func (s *Store) LegacyReleasePending(ctx context.Context, entryID, reason string) error {
	defer s.cfg.OnPending() // a spurious wake-up after a refusal costs one empty lease
	return s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		w, err := s.lockLive(ctx, tx, entryID)
		if errors.Is(err, ErrNotFound) {
			return invalidf("entry_id not found: %s", entryID)
		} else if err != nil {
			return err
		}
		switch {
		case isV2(w):
			return staleFence("queue/release_pending", w)
		case w.Status != StatusAssigned:
			return &NotAssignedError{ActualState: w.Status}
		}
		if _, err := s.q.WorkItemLegacyReleasePending(ctx, tx, w.ID); err != nil {
			return fmt.Errorf("release legacy entry: %w", err)
		}
		return s.audit(ctx, tx, w.ID, s.now(), "queue/release_pending", StatusAssigned, StatusPending, strings.TrimSpace(reason))
	})
}

// LegacyComplete finishes an assigned legacy item with status, if its
// workflow_ref and workflow_id match when given. Anything else is NotFound.
// It returns *StaleFenceError for a v2 item, in any status.
func (s *Store) LegacyComplete(ctx context.Context, entryID, status, workflowRef, workflowID string) (Change, error) {
	switch status {
	case StatusCompleted, StatusFailed, StatusCancelled:
	default:
		return Change{}, invalidf("completion status must be completed, failed or cancelled, not %q", status)
	}
	id, err := uuid.Parse(entryID)
	if err != nil {
		return Change{NotFound: true}, nil
	}
	var ch Change
	err = s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		w, err := s.q.WorkItemGetForUpdate(ctx, tx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			ch.NotFound = true
			return nil
		} else if err != nil {
			return fmt.Errorf("lock work item: %w", err)
		}
		if isV2(w) {
			return staleFence("queue/completion", w)
		}
		var d struct {
			WorkflowRef string `json:"workflow_ref"`
		}
		_ = json.Unmarshal(w.Dispatch, &d) // a dispatch we stored always decodes
		if w.Status != StatusAssigned || (workflowRef != "" && workflowRef != d.WorkflowRef) ||
			(workflowID != "" && workflowID != dbq.Deref(w.WorkflowID)) {
			ch.NotFound = true
			return nil
		}
		done, err := s.q.WorkItemLegacyComplete(ctx, tx, dbq.WorkItemLegacyCompleteParams{ID: id, Status: status, Now: s.now()})
		if err != nil {
			return fmt.Errorf("complete legacy entry: %w", err)
		}
		ch.Changed = true
		return s.cfg.Observer.Finished(ctx, tx, Item{row: done})
	})
	return ch, err
}
