package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
)

// CancelResult says what closing a subject did.
type CancelResult struct {
	// Cancelled are the pending and held items that finished cancelled.
	Cancelled []Item
	// Requested are the assigned items asked to stop; each is told at its
	// owner's next renew.
	Requested []Item
}

// Any reports whether the close touched any item.
func (r CancelResult) Any() bool { return len(r.Cancelled)+len(r.Requested) > 0 }

// CancelSubjectTx acts on a closed (or cancelled) subject inside the
// caller's transaction: its pending and held items finish with outcome
// cancelled, and its assigned items are marked so that their next Renew
// ends them. reason, if not empty, is how they ended (ReadEnding): who
// cancelled them and how.
func (s *Store) CancelSubjectTx(ctx context.Context, tx pgx.Tx, qualifiedID, reason string) (CancelResult, error) {
	now := s.now()
	rows, err := s.q.WorkItemCancelSubject(ctx, tx, dbq.WorkItemCancelSubjectParams{Now: now, CanonicalID: qualifiedID})
	if err != nil {
		return CancelResult{}, fmt.Errorf("cancel subject %s: %w", qualifiedID, err)
	}
	req, err := s.q.WorkItemRequestCancel(ctx, tx, dbq.WorkItemRequestCancelParams{Now: now, CanonicalID: qualifiedID})
	if err != nil {
		return CancelResult{}, fmt.Errorf("request cancel of subject %s: %w", qualifiedID, err)
	}
	return s.cancelled(ctx, tx, rows, req, reason)
}

// CancelEntryTx cancels one live item inside the caller's transaction, as
// CancelSubjectTx does a subject's: pending or held, it finishes cancelled;
// assigned, it is asked to stop (once: a second request changes nothing).
// reason is how it ended. A finished or unknown item is left alone (an
// empty result).
func (s *Store) CancelEntryTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, reason string) (CancelResult, error) {
	now := s.now()
	var rows, req []dbq.WorkItem
	w, err := s.q.WorkItemCancelEntry(ctx, tx, dbq.WorkItemCancelEntryParams{Now: now, ID: id})
	switch {
	case err == nil:
		rows = append(rows, w)
	case !errors.Is(err, pgx.ErrNoRows):
		return CancelResult{}, fmt.Errorf("cancel queue entry %s: %w", id, err)
	default:
		w, err = s.q.WorkItemRequestCancelEntry(ctx, tx, dbq.WorkItemRequestCancelEntryParams{Now: now, ID: id})
		switch {
		case err == nil:
			req = append(req, w)
		case !errors.Is(err, pgx.ErrNoRows):
			return CancelResult{}, fmt.Errorf("request cancel of queue entry %s: %w", id, err)
		}
	}
	return s.cancelled(ctx, tx, rows, req, reason)
}

// cancelled tells the Observer of the items that finished cancelled and
// returns them with those asked to stop; once the transaction commits,
// Config.OnCancel tells their owners to renew now.
func (s *Store) cancelled(ctx context.Context, tx pgx.Tx, rows, requested []dbq.WorkItem, reason string) (CancelResult, error) {
	if len(requested) > 0 {
		AfterCommit(ctx, s.cfg.OnCancel)
	}
	if reason != "" && len(rows)+len(requested) > 0 {
		ids := make([]uuid.UUID, 0, len(rows)+len(requested))
		for _, w := range append(append([]dbq.WorkItem{}, rows...), requested...) {
			ids = append(ids, w.ID)
		}
		if err := s.q.WorkItemEndingSet(ctx, tx, dbq.WorkItemEndingSetParams{EntryIds: ids, EndReason: &reason}); err != nil {
			return CancelResult{}, fmt.Errorf("record why items were cancelled: %w", err)
		}
	}
	var res CancelResult
	for _, w := range rows {
		if err := s.cfg.Observer.Finished(ctx, tx, Item{row: w}); err != nil {
			return res, fmt.Errorf("observe cancel: %w", err)
		}
		res.Cancelled = append(res.Cancelled, Item{row: w})
	}
	for _, w := range requested {
		res.Requested = append(res.Requested, Item{row: w})
	}
	return res, nil
}
