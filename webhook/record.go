package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
)

// Recording a verified delivery and acting on it, in one transaction.

// arrival is a verified, mapped delivery about to be recorded.
type arrival struct {
	event, deliveryID string
	secretIndex       int
	bodySHA256        string
	decision          Decision
	// traceParent is the delivery's trace (its record span), "" untraced.
	traceParent string
}

// rollbackError ends the transaction without committing anything and
// carries the answer to give instead.
type rollbackError struct{ res Result }

func (e *rollbackError) Error() string { return "rolled back: " + string(e.res.Outcome) }

// record runs the delivery's transaction: a first arrival of an enqueue
// decision joins the next group (group.go); anything else is recorded on
// its own.
func (h *Handler) record(ctx context.Context, a arrival) (Result, error) {
	if h.group != nil && a.decision.Kind == KindEnqueue {
		return h.recordGrouped(ctx, a)
	}
	return h.recordAlone(ctx, a, false)
}

// recordAlone runs the delivery's own transaction: it records the arrival,
// then acts on a first arrival or answers a redelivery from the stored row.
// full skips the fast path, for an arrival known to be a replay or a
// collision.
func (h *Handler) recordAlone(ctx context.Context, a arrival, full bool) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	var res Result
	// A lost race on a queue index aborts the transaction; RunTx runs it
	// again, and the re-run answers from the winner (a replay or a
	// collision). It wakes idle workers after committing a new item.
	err := h.store.RunTx(ctx, func(ctx context.Context, tx pgx.Tx, attempt int) (bool, error) {
		var err error
		if attempt == 0 && !full {
			if res, err = h.first(ctx, tx, a); err != nil {
				return false, err
			}
			return res.Outcome == OutcomeEnqueued, nil
		}
		if res, err = h.recordFull(ctx, tx, a); err != nil {
			return false, err
		}
		if err := h.outcome(ctx, tx, res); err != nil {
			return false, err
		}
		return res.Outcome == OutcomeEnqueued, nil
	})
	var rb *rollbackError
	if errors.As(err, &rb) {
		return rb.res, nil
	}
	return res, err
}

// first is the fast path of a first arrival: it is acted on, then recorded
// with its outcome in one write, sent with the COMMIT (one round trip for
// both). A replay or a collision makes the optimistic insert write nothing
// (queue.ErrTaken) or violate a unique index of the queue, a redelivery the
// delivery's primary key (at the commit): the transaction then starts over
// in the full path.
func (h *Handler) first(ctx context.Context, tx pgx.Tx, a arrival) (Result, error) {
	res, stored, err := h.act(ctx, tx, a, true)
	if err != nil {
		return res, err
	}
	if err := h.outcome(ctx, tx, res); err != nil {
		return res, err
	}
	if err := h.q.DeliveryInsertFirst(ctx, queue.AtCommit(tx), dbq.DeliveryInsertFirstParams(h.recordParams(a, stored, res))); err != nil {
		return res, fmt.Errorf("record delivery: %w", err)
	}
	return res, nil
}

// outcome tells HandlerConfig.OnOutcome the delivery's outcome, in its
// transaction.
func (h *Handler) outcome(ctx context.Context, tx pgx.Tx, res Result) error {
	if h.cfg.OnOutcome == nil {
		return nil
	}
	if err := h.cfg.OnOutcome(ctx, tx, res); err != nil {
		return fmt.Errorf("act on delivery outcome: %w", err)
	}
	return nil
}

// outcomeReceived is stored for a delivery recorded before it is acted on,
// inside its transaction only.
const outcomeReceived Outcome = "received"

// recordParams is the delivery row of arrival a with outcome stored and the
// item and reason of res.
func (h *Handler) recordParams(a arrival, stored Outcome, res Result) dbq.DeliveryRecordParams {
	f := a.decision.Facts
	return dbq.DeliveryRecordParams{
		DeliveryID:     a.deliveryID,
		Event:          a.event,
		Action:         f.Action,
		InstallationID: f.InstallationID,
		RepositoryID:   f.RepositoryID,
		Repository:     f.Repository,
		Sender:         f.Sender,
		SecretIndex:    int32(a.secretIndex),
		BodySha256:     a.bodySHA256,
		Now:            h.cfg.Now().UTC(),
		Outcome:        string(stored),
		Reason:         optional(res.Reason),
		EntryID:        parseEntryID(res.EntryID),
		QualifiedID:    optional(res.QualifiedID),
		Generation:     generationParam(res.Generation),
	}
}

// recordFull records the arrival first, then acts on a first arrival or
// answers a redelivery from the stored row, with the queue's lookups.
func (h *Handler) recordFull(ctx context.Context, tx pgx.Tx, a arrival) (Result, error) {
	row, err := h.q.DeliveryRecord(ctx, tx, h.recordParams(a, outcomeReceived, Result{}))
	if err != nil {
		return Result{}, fmt.Errorf("record delivery: %w", err)
	}
	if !row.Inserted {
		return redelivery(row, a), nil
	}
	res, stored, err := h.act(ctx, tx, a, false)
	if err != nil {
		return res, err
	}
	if err := h.q.DeliverySetOutcome(ctx, tx, dbq.DeliverySetOutcomeParams{
		DeliveryID:  a.deliveryID,
		Outcome:     string(stored),
		Reason:      optional(res.Reason),
		EntryID:     parseEntryID(res.EntryID),
		QualifiedID: optional(res.QualifiedID),
		Generation:  generationParam(res.Generation),
	}); err != nil {
		return res, fmt.Errorf("store delivery outcome: %w", err)
	}
	return res, nil
}

// redelivery answers an arrival whose delivery ID was recorded before.
func redelivery(row dbq.DeliveryRecordRow, a arrival) Result {
	res := Result{Event: a.event, Decision: a.decision, TraceParent: a.traceParent, Response: Response{DeliveryID: a.deliveryID}}
	if row.BodySha256 != a.bodySHA256 {
		res.Outcome = OutcomeIdempotencyConflict
		res.Reason = "this delivery ID was first received with another body"
		return res
	}
	res.Outcome = OutcomeReplay
	if row.EntryID != nil {
		res.EntryID = row.EntryID.String()
	}
	res.QualifiedID = dbq.Deref(row.QualifiedID)
	if row.Generation != nil {
		g := uint64(*row.Generation)
		res.Generation = &g
	}
	res.Reason = "first answered " + row.Outcome
	if row.Reason != nil {
		res.Reason += ": " + *row.Reason
	}
	return res
}

// act carries out a first arrival's decision. It returns the answer and the
// outcome to store, which differs from the answer only for a queue-level
// replay (stored as the enqueue it replays).
func (h *Handler) act(ctx context.Context, tx pgx.Tx, a arrival, optimistic bool) (Result, Outcome, error) {
	dec := a.decision
	res := Result{Event: a.event, Decision: dec, TraceParent: a.traceParent, Response: Response{DeliveryID: a.deliveryID}}
	switch dec.Kind {
	case KindCancel:
		var cr queue.CancelResult
		var err error
		if dec.CheckRun != nil {
			var why string
			if cr, why, err = h.cancelCheckRun(ctx, tx, dec); err != nil {
				return res, "", err
			}
			if why != "" {
				res.Outcome, res.Reason = OutcomeIgnored, why
				return res, res.Outcome, nil
			}
		} else if cr, err = h.store.CancelSubjectTx(ctx, tx, dec.QualifiedID, dec.CancelReason); err != nil {
			return res, "", err
		}
		touched := make([]queue.Item, 0, len(cr.Cancelled)+len(cr.Requested))
		touched = append(append(touched, cr.Cancelled...), cr.Requested...)
		if len(touched) == 0 {
			res.Outcome, res.Reason = OutcomeIgnored, "nothing live to cancel for "+dec.QualifiedID
			return res, res.Outcome, nil
		}
		res.Outcome = OutcomeCancelled
		nameItem(&res.Response, touched[0].EntryID(), touched[0].QualifiedID(), ptrGen(touched[0].Generation()))
		res.Reason = fmt.Sprintf("%d pending or held item(s) cancelled, %d assigned item(s) asked to stop", len(cr.Cancelled), len(cr.Requested))
		return res, res.Outcome, nil
	case KindCancelInstallation:
		return h.cancelInstallation(ctx, tx, res)
	case KindRerun:
		dec, err := h.rerunEnqueue(ctx, tx, dec, a.deliveryID, a.event)
		if err != nil {
			return res, "", err
		}
		res.Decision = dec
		if dec.Kind == KindEnqueue {
			return h.enqueue(ctx, tx, res, false)
		}
		res.Outcome, res.Reason = OutcomeIgnored, dec.Reason
		return res, res.Outcome, nil
	case KindEnqueue:
		return h.enqueue(ctx, tx, res, optimistic)
	}
	res.Outcome, res.Reason = OutcomeIgnored, dec.Reason
	return res, res.Outcome, nil
}

// enqueue creates the decision's item and maps the queue's answer to an
// outcome. A first arrival is usually a new item: optimistic, it inserts
// without the lookups, and a replay or collision makes the transaction run
// again, this time with them.
func (h *Handler) enqueue(ctx context.Context, tx pgx.Tx, res Result, optimistic bool) (Result, Outcome, error) {
	enqueue := h.store.EnqueueTx
	if optimistic {
		enqueue = h.store.EnqueueTxOptimistic
	}
	er, err := enqueue(ctx, tx, enqueueParams(res.Decision, res.TraceParent))
	return enqueueAnswer(res, er, err)
}

// enqueueParams is the enqueue of decision d.
func enqueueParams(d Decision, traceParent string) queue.EnqueueParams {
	p := d.Enqueue
	p.FromGitHub = true // this delivery's signature verified
	p.TraceParent = traceParent
	return p
}

// enqueueAnswer maps the queue's answer to an enqueue, er and err, to the
// delivery's answer and the outcome to store.
func enqueueAnswer(res Result, er queue.EnqueueResult, err error) (Result, Outcome, error) {
	var (
		sc   *queue.SubjectCollisionError
		rc   *queue.ReservationCollisionError
		ic   *queue.IdempotencyConflictError
		inv  *queue.InvalidError
		gen  = er.Subject.Generation
		kept Outcome
	)
	switch {
	case err == nil && er.Enqueued:
		res.Outcome = OutcomeEnqueued
		nameItem(&res.Response, er.EntryID, er.Subject.QualifiedID, &gen)
		kept = OutcomeEnqueued
	case err == nil:
		// The queue already holds this delivery's item: its delivery row was
		// pruned and GitHub redelivered. Store it as the enqueue it was.
		res.Outcome, res.Reason = OutcomeReplay, "the queue already holds this delivery's item"
		nameItem(&res.Response, er.EntryID, er.Subject.QualifiedID, &gen)
		kept = OutcomeEnqueued
	case errors.As(err, &sc):
		res.Outcome = OutcomeSubjectCollision
		nameItem(&res.Response, sc.EntryID, sc.QualifiedID, sc.Generation)
		res.Reason = "the subject already has a live generation (" + sc.Status + ")"
		kept = res.Outcome
	case errors.As(err, &rc):
		res.Outcome = OutcomeReservationCollision
		g := rc.Generation
		nameItem(&res.Response, rc.EntryID, rc.QualifiedID, &g)
		res.Reason = fmt.Sprintf("%s %s is held by a live item (%s)", rc.Holder.Repository, rc.Holder.HeadRef, rc.Status)
		kept = res.Outcome
	case errors.As(err, &ic):
		res.Outcome, res.Reason = OutcomeIdempotencyConflict, "the queue holds another request under this delivery ID"
		return res, "", &rollbackError{res: res}
	case errors.As(err, &inv):
		// The mapper validates what it builds, so this is not expected; but
		// it is about this delivery's content, not the database: a 400 that
		// stores nothing.
		res.Response = Response{DeliveryID: res.DeliveryID, Error: "the delivery makes no valid queue request: " + inv.Error()}
		res.status = http.StatusBadRequest
		return res, "", &rollbackError{res: res}
	default:
		return res, "", fmt.Errorf("enqueue: %w", err)
	}
	return res, kept, nil
}

func nameItem(r *Response, entryID, qualifiedID string, gen *uint64) {
	r.EntryID, r.QualifiedID, r.Generation = entryID, qualifiedID, gen
}

func ptrGen(g uint64) *uint64 {
	if g == 0 {
		return nil
	}
	return &g
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func parseEntryID(s string) *uuid.UUID {
	id, err := uuid.Parse(s)
	if err != nil {
		return nil
	}
	return &id
}

func generationParam(g *uint64) *int64 {
	if g == nil {
		return nil
	}
	v := int64(*g)
	return &v
}
