package queue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
)

// maxKeyLen is the longest idempotency key, after trimming.
const maxKeyLen = 256

// preparedEnqueue is a validated enqueue, ready to run in a transaction.
type preparedEnqueue struct {
	canonicalID string
	taskID      string
	subject     *SubjectRef // the request's subject, as the dispatch stores it
	dispatch    []byte
	key         string
	hash        string
	res         *Reservation
	runAt       *string
	runAtTime   *time.Time
	expireAfter *int64
	expiresAt   *time.Time
	source      string
	traceParent string
}

// ValidateReservation checks r as a RepositoryReservation: repository
// non-blank; refs non-blank, under refs/, without "..", without a trailing
// "/"; base and head differ.
func ValidateReservation(r Reservation) error {
	if strings.TrimSpace(r.Repository) == "" {
		return invalidf("repository reservation needs a repository")
	}
	for _, ref := range []struct{ name, v string }{{"base_ref", r.BaseRef}, {"head_ref", r.HeadRef}} {
		switch {
		case strings.TrimSpace(ref.v) == "":
			return invalidf("repository reservation %s is blank", ref.name)
		case !strings.HasPrefix(ref.v, "refs/"):
			return invalidf("repository reservation %s %q must start with refs/", ref.name, ref.v)
		case strings.Contains(ref.v, ".."):
			return invalidf("repository reservation %s %q must not contain ..", ref.name, ref.v)
		case strings.HasSuffix(ref.v, "/"):
			return invalidf("repository reservation %s %q must not end with /", ref.name, ref.v)
		}
	}
	if r.BaseRef == r.HeadRef {
		return invalidf("repository reservation base_ref and head_ref must differ")
	}
	return nil
}

func prepareEnqueue(p EnqueueParams) (preparedEnqueue, error) {
	var pe preparedEnqueue
	d := p.Dispatch
	if d.Subject == nil {
		return pe, invalidf("queue subject identity is missing")
	}
	if strings.TrimSpace(d.WorkflowRef) == "" {
		return pe, invalidf("subject_dispatch.workflow_ref must not be blank")
	}
	if p.Reservation != nil {
		if err := ValidateReservation(*p.Reservation); err != nil {
			return pe, err
		}
		pe.res = &Reservation{
			Repository: strings.TrimSpace(p.Reservation.Repository),
			BaseRef:    strings.TrimSpace(p.Reservation.BaseRef),
			HeadRef:    strings.TrimSpace(p.Reservation.HeadRef),
		}
	}
	var err error
	if pe.canonicalID, err = CanonicalID(d.Subject.Kind, d.Subject.ID); err != nil {
		return pe, err
	}
	pe.taskID = TaskID(d.Subject.Kind, d.Subject.ID)
	if err := pe.schedule(p.RunAt, p.ExpireAfterSecs, true); err != nil {
		return pe, err
	}
	if p.IdempotencyKey != "" {
		if strings.TrimSpace(p.IdempotencyKey) == "" {
			return pe, invalidf("idempotency_key must not be blank")
		}
		pe.key = strings.TrimSpace(p.IdempotencyKey)
		if len(pe.key) > maxKeyLen {
			return pe, invalidf("idempotency_key must be at most %d characters", maxKeyLen)
		}
	}
	if pe.dispatch, pe.hash, err = encodeEnqueue(d, pe.res, pe.runAt, p.ExpireAfterSecs); err != nil {
		return pe, err
	}
	pe.subject = d.Subject
	pe.source = SourceRPC
	pe.traceParent = p.TraceParent
	if p.FromGitHub {
		pe.source = SourceGitHub
	}
	return pe, nil
}

// schedule records run_at and the expiry it implies. A run_at that does not
// parse is an error when strict (v2) and counts as due otherwise (legacy).
func (pe *preparedEnqueue) schedule(runAt string, expireAfterSecs *uint64, strict bool) error {
	if expireAfterSecs != nil {
		if *expireAfterSecs > math.MaxInt64/1000 {
			return invalidf("expire_after_secs is too large")
		}
		pe.expireAfter = new(int64(*expireAfterSecs))
	}
	if runAt == "" {
		return nil
	}
	pe.runAt = &runAt
	t, err := parseRFC3339(runAt)
	if err != nil {
		if strict {
			return invalidf("run_at %q is not an RFC 3339 timestamp", runAt)
		}
		return nil
	}
	pe.runAtTime = &t
	if pe.expireAfter != nil {
		// Postgres and RFC 3339 stop at year 9999; an expiry past it cannot be stored.
		limit := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
		if *pe.expireAfter > int64(limit.Sub(t)/time.Second) || t.After(limit) {
			if strict {
				return invalidf("run_at + expire_after_secs is not a valid timestamp")
			}
			return nil
		}
		pe.expiresAt = new(t.Add(time.Duration(*pe.expireAfter) * time.Second))
	}
	return nil
}

// Enqueue creates a pending v2 work item for p's subject with the subject's
// next generation, atomically with every check below.
//
// A repeat of the same idempotency key and request hash returns the first
// answer with Enqueued false, whatever has happened to that item since. It
// returns *InvalidError for a malformed request, *IdempotencyConflictError when
// the key is bound to another request, *SubjectCollisionError when the subject
// has a live generation and *ReservationCollisionError when another live item
// holds the same repository and head ref. A rejected call changes nothing and
// binds no key.
func (s *Store) Enqueue(ctx context.Context, p EnqueueParams) (_ EnqueueResult, err error) {
	defer s.timed("enqueue", time.Now(), &err)
	pe, err := prepareEnqueue(p)
	if err != nil {
		return EnqueueResult{}, err
	}
	var res EnqueueResult
	if res, ok, err := s.enqueueOptimistic(ctx, pe); ok || err != nil {
		if err == nil {
			s.cfg.OnPending()
		}
		return res, err
	}
	err = s.RunTx(ctx, func(ctx context.Context, tx pgx.Tx, _ int) (bool, error) {
		res, err = s.enqueue(ctx, tx, pe)
		return res.Enqueued, err
	})
	return res, err
}

// EnqueueTx is Enqueue inside the caller's transaction, so the caller can
// record its own rows in the same commit. A typed rejection leaves tx
// usable. A lost race with a concurrent writer aborts tx and returns an
// error for which IsRetryable is true: the caller runs its transaction
// again, which then answers from the winner: run tx with RunTx, which does
// that and wakes idle workers after committing a created item.
func (s *Store) EnqueueTx(ctx context.Context, tx pgx.Tx, p EnqueueParams) (_ EnqueueResult, err error) {
	defer s.timed("enqueue", time.Now(), &err)
	pe, err := prepareEnqueue(p)
	if err != nil {
		return EnqueueResult{}, err
	}
	return s.enqueue(ctx, tx, pe)
}

// enqueueOptimistic tries the common case in one autocommitted statement:
// no replay, no collision, nothing for the Observer to write. The unique
// indexes decide: if the insert violates one (the key is bound, the subject
// or the branch is live, or an expired item still blocks until it is
// swept), ok is false and nothing happened, and the full path answers.
func (s *Store) enqueueOptimistic(ctx context.Context, pe preparedEnqueue) (res EnqueueResult, ok bool, err error) {
	f, filters := s.cfg.Observer.(EnqueueFilter)
	if !filters || f.ObservesEnqueue(pe.subject) {
		return res, false, nil
	}
	ins := s.insertParams(pe, s.now())
	row, err := s.q.WorkItemInsertNextGeneration(ctx, s.pool, ins)
	switch {
	case isUniqueViolation(err) || errors.Is(err, pgx.ErrNoRows):
		return res, false, nil
	case err != nil:
		return res, false, fmt.Errorf("insert work item: %w", err)
	}
	return EnqueueResult{Enqueued: true, EntryID: ins.ID.String(), Subject: SubjectGeneration{
		QualifiedID: pe.canonicalID, Generation: uint64(dbq.Deref(row.SubjectGeneration)),
	}}, true, nil
}

// EnqueueFilter is implemented by an Observer that can tell, from the
// subject an item is enqueued with (never nil), whether Enqueued would write
// anything for it. Items it does not observe are enqueued without an
// explicit transaction.
type EnqueueFilter interface {
	ObservesEnqueue(subject *SubjectRef) bool
}

// EnqueueTxOptimistic is EnqueueTx for a caller that expects a new item: it
// inserts at once, without the lookups (and without the expiry sweep), and
// leaves replays and collisions to the insert's own probes and the unique
// indexes. Such a call returns ErrTaken (tx still usable) or, for a race the
// probes could not see, a unique violation (tx aborted); IsRetryable is true
// for both, and the caller then runs its transaction again with EnqueueTx,
// which answers the replay or collision.
// A new item costs one statement instead of two.
func (s *Store) EnqueueTxOptimistic(ctx context.Context, tx pgx.Tx, p EnqueueParams) (_ EnqueueResult, err error) {
	defer s.timed("enqueue", time.Now(), &err)
	pe, err := prepareEnqueue(p)
	if err != nil {
		return EnqueueResult{}, err
	}
	return s.insert(ctx, tx, pe, s.now())
}

// IsRetryable reports whether err is a lost race on one of the queue's
// unique indexes, or an optimistic insert that found its key, subject or
// reservation taken, after which running the transaction again succeeds or
// answers from the winner.
func IsRetryable(err error) bool {
	return isUniqueViolation(err) || errors.Is(err, ErrTaken)
}

// ErrTaken is what EnqueueTxOptimistic returns when its insert found the
// key bound, the subject live or the reservation held (or a pending or held
// legacy item of the subject): nothing was written and tx is still usable,
// so a caller recording several deliveries in one transaction can set this
// one aside and answer it with EnqueueTx in a transaction of its own.
// IsRetryable is true for it.
var ErrTaken = errors.New("the key, the subject or the reservation is taken: run the enqueue again")

// enqueue decides from one snapshot of the key's item, the subject's live
// blocker and the reservation's holder, then creates the item with its next
// generation in one statement.
func (s *Store) enqueue(ctx context.Context, tx pgx.Tx, pe preparedEnqueue) (EnqueueResult, error) {
	now := s.now()
	args := dbq.WorkItemEnqueueBlockersParams{Now: now, IdempotencyKey: pe.key, CanonicalID: pe.canonicalID}
	if pe.res != nil {
		args.Repository, args.HeadRef = pe.res.Repository, pe.res.HeadRef
	}
	blockers, err := s.q.WorkItemEnqueueBlockers(ctx, tx, args)
	if err != nil {
		return EnqueueResult{}, fmt.Errorf("look up enqueue blockers: %w", err)
	}
	by := map[string]dbq.WorkItem{}
	for _, b := range blockers {
		if b.Why == "swept" {
			w := b.WorkItem // as it was before the sweep in this statement
			w.Status, w.FinishedAt = StatusDropped, &now
			if err := s.swept(ctx, tx, now, w); err != nil {
				return EnqueueResult{}, err
			}
			continue
		}
		by[b.Why] = b.WorkItem
	}
	if bound, ok := by["key"]; ok {
		if dbq.Deref(bound.RequestHash) != pe.hash {
			return EnqueueResult{}, &IdempotencyConflictError{Key: pe.key}
		}
		return EnqueueResult{Enqueued: false, EntryID: bound.ID.String(), Subject: SubjectGeneration{
			QualifiedID: dbq.Deref(bound.CanonicalID), Generation: uint64(dbq.Deref(bound.SubjectGeneration)),
		}}, nil
	}
	if blocker, ok := by["subject"]; ok {
		e := &SubjectCollisionError{QualifiedID: pe.canonicalID, EntryID: blocker.ID.String(), Status: blocker.Status}
		if blocker.SubjectGeneration != nil {
			e.Generation = new(uint64(*blocker.SubjectGeneration))
		}
		return EnqueueResult{}, e
	}
	if holder, ok := by["reservation"]; ok {
		return EnqueueResult{}, &ReservationCollisionError{
			Holder:      *Item{row: holder}.Reservation(),
			EntryID:     holder.ID.String(),
			QualifiedID: dbq.Deref(holder.CanonicalID),
			Generation:  uint64(dbq.Deref(holder.SubjectGeneration)),
			Status:      holder.Status,
		}
	}
	return s.insert(ctx, tx, pe, now)
}

// insert creates the item with its subject's next generation and tells the
// Observer, in tx.
func (s *Store) insert(ctx context.Context, tx pgx.Tx, pe preparedEnqueue, now time.Time) (EnqueueResult, error) {
	ins := s.insertParams(pe, now)
	chosen, err := s.q.WorkItemInsertNextGeneration(ctx, tx, ins)
	if errors.Is(err, pgx.ErrNoRows) {
		return EnqueueResult{}, ErrTaken
	}
	if err != nil {
		return EnqueueResult{}, fmt.Errorf("insert work item: %w", err)
	}
	row := insertedRow(ins, chosen)
	if err := s.cfg.Observer.Enqueued(ctx, tx, Item{row: row, subject: pe.subject}); err != nil {
		return EnqueueResult{}, fmt.Errorf("observe enqueue: %w", err)
	}
	return enqueued(row, pe), nil
}

// enqueued is the answer for row, created for pe.
func enqueued(row dbq.WorkItem, pe preparedEnqueue) EnqueueResult {
	return EnqueueResult{Enqueued: true, EntryID: row.ID.String(), Subject: SubjectGeneration{
		QualifiedID: pe.canonicalID, Generation: uint64(dbq.Deref(row.SubjectGeneration)),
	}}
}

// insertedRow is the row WorkItemInsertNextGeneration stored: the values
// sent, the columns' defaults, and what the database chose. (The dispatch
// is the JSON value sent; jsonb may lay it out otherwise.)
// TestInsertedRowIsTheStoredRow holds it equal to the row read back.
func insertedRow(p dbq.WorkItemInsertNextGenerationParams, chosen dbq.WorkItemInsertNextGenerationRow) dbq.WorkItem {
	canonical := p.CanonicalID
	micro := func(t *time.Time) *time.Time { // what the database keeps of a time
		if t == nil {
			return nil
		}
		return new(t.Truncate(time.Microsecond))
	}
	return dbq.WorkItem{
		ID: p.ID, Position: chosen.Position, Status: StatusPending, IsV2: true,
		SubjectID: canonical, CanonicalID: &canonical, SubjectGeneration: chosen.SubjectGeneration,
		TaskID: p.TaskID, Dispatch: p.Dispatch, EnqueuedAt: *micro(&p.EnqueuedAt),
		RunAt: p.RunAt, RunAtTime: micro(p.RunAtTime), ExpireAfterSecs: p.ExpireAfterSecs, ExpiresAfter: micro(p.ExpiresAfter),
		IdempotencyKey: p.IdempotencyKey, RequestHash: p.RequestHash,
		Repository: p.Repository, BaseRef: p.BaseRef, HeadRef: p.HeadRef, CollisionKey: chosen.CollisionKey,
		Source: p.Source, TraceParent: p.TraceParent,
	}
}

func (s *Store) insertParams(pe preparedEnqueue, now time.Time) dbq.WorkItemInsertNextGenerationParams {
	ins := dbq.WorkItemInsertNextGenerationParams{
		ID:              s.cfg.NewID(),
		CanonicalID:     pe.canonicalID,
		Dispatch:        pe.dispatch,
		EnqueuedAt:      now,
		RunAt:           pe.runAt,
		RunAtTime:       pe.runAtTime,
		ExpireAfterSecs: pe.expireAfter,
		ExpiresAfter:    pe.expiresAt,
		RequestHash:     &pe.hash,
		Source:          pe.source,
	}
	if pe.taskID != "" {
		ins.TaskID = &pe.taskID
	}
	if pe.key != "" {
		ins.IdempotencyKey = &pe.key
	}
	if pe.res != nil {
		ins.Repository, ins.BaseRef, ins.HeadRef = &pe.res.Repository, &pe.res.BaseRef, &pe.res.HeadRef
	}
	if pe.traceParent != "" {
		ins.TraceParent = &pe.traceParent
	}
	return ins
}
