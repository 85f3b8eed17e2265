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

// Operator actions: what a person does to one item from the dashboard.
const (
	ActionHold    = "hold"    // pause a pending item
	ActionRelease = "release" // return a held item to pending
	ActionDrop    = "drop"    // finish a pending or held item dropped; cannot be undone
	ActionReclaim = "reclaim" // give an assigned item whose lease expired back to pending
	ActionCancel  = "cancel"  // cancel a live item as its check run's Cancel button does; cannot be undone
)

// ActParams names an operator action on one item and who took it.
type ActParams struct {
	EntryID string
	Action  string // one of the Action constants
	// Actor is who acted, as the audit log records it (for the dashboard,
	// the session kind: "admin session").
	Actor string
}

// NotActionableError is returned by Act when the item exists but is not in
// a status the action applies to (holding an assigned item, reclaiming a
// live lease).
type NotActionableError struct {
	EntryID, Action, Status string
}

func (e *NotActionableError) Error() string {
	return fmt.Sprintf("cannot %s queue entry %s: it is %s", e.Action, e.EntryID, e.Status)
}

// Act applies an operator action to one item and writes it, with
// p.Actor, to the item's audit log in the same transaction (method
// "operator/<action>"). A drop tells the Observer the item finished, so its
// check run concludes; so does a cancel of a pending or held item, and a
// cancel of an assigned one asks its owner to stop (CancelEntryTx). It returns ErrNotFound for an unknown entry,
// *NotActionableError when the item's status does not allow the action
// (reclaiming a lease that has not expired included), and *InvalidError for
// an unknown action or a blank actor.
func (s *Store) Act(ctx context.Context, p ActParams) (err error) {
	switch p.Action {
	case ActionHold, ActionRelease, ActionDrop, ActionReclaim, ActionCancel:
	default:
		return invalidf("unknown operator action %q", p.Action)
	}
	defer s.timed("operator_"+p.Action, time.Now(), &err)
	actor := strings.TrimSpace(p.Actor)
	if actor == "" {
		return invalidf("operator action needs an actor")
	}
	id, err := uuid.Parse(p.EntryID)
	if err != nil {
		return ErrNotFound
	}
	pending := false
	err = s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		now := s.now()
		var w dbq.WorkItem
		var from string
		switch p.Action {
		case ActionHold:
			from = StatusPending
			w, err = s.q.WorkItemHold(ctx, tx, dbq.WorkItemHoldParams{ID: id, Now: now})
		case ActionRelease:
			from = StatusHeld
			w, err = s.q.WorkItemRelease(ctx, tx, id)
		case ActionDrop:
			var cur dbq.WorkItem
			if cur, err = s.q.WorkItemGetForUpdate(ctx, tx, id); err == nil {
				from = cur.Status
				w, err = s.q.WorkItemDropWaiting(ctx, tx, dbq.WorkItemDropWaitingParams{ID: id, Now: now})
			}
		case ActionReclaim:
			from = StatusAssigned
			w, err = s.q.WorkItemReclaimExpired(ctx, tx, dbq.WorkItemReclaimExpiredParams{ID: id, Now: now})
		case ActionCancel:
			var cur dbq.WorkItem
			if cur, err = s.q.WorkItemGetForUpdate(ctx, tx, id); err == nil {
				from = cur.Status
				var res CancelResult
				if res, err = s.CancelEntryTx(ctx, tx, id, "Cancelled by an operator from the dashboard ("+actor+")"); err != nil {
					return err
				}
				switch {
				case len(res.Cancelled) == 1:
					return s.audit(ctx, tx, id, now, "operator/"+p.Action, from, StatusCancelled, actor)
				case len(res.Requested) == 1:
					// Its owner ends it at its next renew, which a built-in
					// worker makes at once.
					return s.audit(ctx, tx, id, now, "operator/"+p.Action, from, from, actor+": asked the worker to stop")
				}
				err = pgx.ErrNoRows
			}
		}
		if errors.Is(err, pgx.ErrNoRows) {
			cur, gerr := s.q.WorkItemGet(ctx, tx, id)
			if gerr != nil {
				return interpretError("read work item", gerr)
			}
			return &NotActionableError{EntryID: p.EntryID, Action: p.Action, Status: cur.Status}
		} else if err != nil {
			return fmt.Errorf("%s work item: %w", p.Action, err)
		}
		if err := s.audit(ctx, tx, id, now, "operator/"+p.Action, from, w.Status, actor); err != nil {
			return err
		}
		pending = w.Status == StatusPending
		if w.Status == StatusDropped {
			if err := s.cfg.Observer.Finished(ctx, tx, Item{row: w}); err != nil {
				return fmt.Errorf("observe drop: %w", err)
			}
		}
		return nil
	})
	if err == nil && pending {
		s.cfg.OnPending()
	}
	return err
}

// AuditTx writes an operator's note about an item that changed no status
// (a GitHub write sent again) to its audit log, inside the caller's
// transaction, with from and to both the item's current status. It returns
// ErrNotFound for an unknown entry.
func (s *Store) AuditTx(ctx context.Context, tx pgx.Tx, entryID uuid.UUID, method, actor string) error {
	w, err := s.q.WorkItemGet(ctx, tx, entryID)
	if err != nil {
		return interpretError("read work item", err)
	}
	return s.audit(ctx, tx, entryID, s.now(), method, w.Status, w.Status, actor)
}
