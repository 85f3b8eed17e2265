package queue

import (
	"context"
	"fmt"

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

// CancelSubjectTx acts on a closed subject inside the caller's transaction:
// its pending and held items finish with outcome cancelled, and its assigned
// items are marked so that their next Renew ends them.
func (s *Store) CancelSubjectTx(ctx context.Context, tx pgx.Tx, qualifiedID string) (CancelResult, error) {
	now := s.now()
	rows, err := s.q.WorkItemCancelSubject(ctx, tx, dbq.WorkItemCancelSubjectParams{Now: now, CanonicalID: qualifiedID})
	if err != nil {
		return CancelResult{}, fmt.Errorf("cancel subject %s: %w", qualifiedID, err)
	}
	req, err := s.q.WorkItemRequestCancel(ctx, tx, dbq.WorkItemRequestCancelParams{Now: now, CanonicalID: qualifiedID})
	if err != nil {
		return CancelResult{}, fmt.Errorf("request cancel of subject %s: %w", qualifiedID, err)
	}
	return s.cancelled(ctx, tx, rows, req)
}

// cancelled tells the Observer of the items that finished cancelled and
// returns them with those asked to stop.
func (s *Store) cancelled(ctx context.Context, tx pgx.Tx, rows, requested []dbq.WorkItem) (CancelResult, error) {
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
