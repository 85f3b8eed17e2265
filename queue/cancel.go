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
	var res CancelResult
	rows, err := s.q.WorkItemCancelSubject(ctx, tx, dbq.WorkItemCancelSubjectParams{Now: now, CanonicalID: qualifiedID})
	if err != nil {
		return res, fmt.Errorf("cancel subject %s: %w", qualifiedID, err)
	}
	for _, w := range rows {
		if err := s.cfg.Observer.Finished(ctx, tx, Item{row: w}); err != nil {
			return res, fmt.Errorf("observe cancel: %w", err)
		}
		res.Cancelled = append(res.Cancelled, Item{row: w})
	}
	req, err := s.q.WorkItemRequestCancel(ctx, tx, dbq.WorkItemRequestCancelParams{Now: now, CanonicalID: qualifiedID})
	if err != nil {
		return res, fmt.Errorf("request cancel of subject %s: %w", qualifiedID, err)
	}
	for _, w := range req {
		res.Requested = append(res.Requested, Item{row: w})
	}
	return res, nil
}
