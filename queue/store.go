// Package queue is gitlease's durable work queue: generation-fenced leases of
// work items held in PostgreSQL, with the invariants of the queue v2 protocol
// enforced by the database itself. Store is its Go API; the JSON-RPC surface
// in queue/rpc is a thin mapping over it.
package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/db/pgtx"
)

// MaxLeaseBatch is the most items one lease call hands out.
const MaxLeaseBatch = 5

// DefaultLeaseTTL is the lease time-to-live when Config.LeaseTTL is zero.
const DefaultLeaseTTL = 30 * time.Minute

// Config configures a Store. The zero value is usable.
type Config struct {
	// LeaseTTL is how long a lease lives without renewal (GITLEASE_LEASE_TTL).
	LeaseTTL time.Duration
	// MaxAssignedPerInstallation caps the items of one GitHub installation
	// assigned at once, over every worker and instance
	// (GITLEASE_MAX_ASSIGNED_PER_INSTALLATION); 0 = no cap. Items over /rpc
	// and stdio are not capped.
	MaxAssignedPerInstallation int
	// Now is the queue's clock; time.Now when nil. Every timestamp the queue
	// writes or compares comes from it, so tests can replay a fixed timeline.
	Now func() time.Time
	// NewID makes entry IDs; uuid.New (v4) when nil.
	NewID func() uuid.UUID
	// Observer is told of every change inside its transaction; none when nil.
	Observer Observer
	// OnOp, if set, is told how long each enqueue, lease and fenced mutation
	// took and whether it failed (for metrics).
	OnOp func(op string, d time.Duration, err error)
	// OnPending, if set, is called after a commit that made an item pending
	// (created, released or returned to pending), so idle workers can lease
	// now rather than at their next poll. It must not block. It is called
	// outside the transaction on purpose: a NOTIFY inside it would serialise
	// every committing enqueue on Postgres's notification lock.
	OnPending func()
	// OnCancel, if set, is called after a commit that asked assigned items
	// to stop (a cancel of their subject, entry or installation), so their
	// owners renew now rather than at their next renew and stop within
	// seconds. It must not block; like OnPending it is called outside the
	// transaction.
	OnCancel func()
	// Views, if set, adds what another package records about an item (its
	// branch, pull request and check run on GitHub) to the item's View.
	Views ViewDecorator
}

// ViewDecorator adds to an item's gitlease/entry/get View what the queue
// does not own: gitlease's GitHub side fills in Provisioning and CheckRunID
// from its own tables.
type ViewDecorator interface {
	DecorateView(ctx context.Context, v *View) error
}

// Observer is told about queue changes inside the transaction that makes
// them, so whatever it writes (gitlease's GitHub outbox) commits or rolls
// back with the change. Its methods must only write through tx.
type Observer interface {
	// Enqueued is called for a newly created item.
	Enqueued(ctx context.Context, tx pgx.Tx, it Item) error
	// Leased is called when an item is handed out or recovered: it has a
	// new lease generation.
	Leased(ctx context.Context, tx pgx.Tx, it Item) error
	// Finished is called when an item reaches its terminal outcome.
	Finished(ctx context.Context, tx pgx.Tx, it Item) error
}

// GroupObserver is implemented by an Observer that can write what Enqueued
// writes for several new items at once. Store.EnqueueGroupTx calls
// EnqueuedGroup once with a group's new items, in the order they were
// created, instead of Enqueued for each.
type GroupObserver interface {
	EnqueuedGroup(ctx context.Context, tx pgx.Tx, items []Item) error
}

type nopObserver struct{}

func (nopObserver) ObservesEnqueue(*SubjectRef) bool { return false }

func (nopObserver) Enqueued(context.Context, pgx.Tx, Item) error { return nil }
func (nopObserver) Leased(context.Context, pgx.Tx, Item) error   { return nil }
func (nopObserver) Finished(context.Context, pgx.Tx, Item) error { return nil }

// Store is the queue on PostgreSQL. It is safe for concurrent use by many
// goroutines and many processes sharing one database.
type Store struct {
	pool *pgxpool.Pool
	q    *dbq.Queries
	cfg  Config
}

// NewStore returns a Store over pool. The schema must be migrated (db.Migrate).
func NewStore(pool *pgxpool.Pool, cfg Config) *Store {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = uuid.New
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.OnOp == nil {
		cfg.OnOp = func(string, time.Duration, error) {}
	}
	if cfg.OnCancel == nil {
		cfg.OnCancel = func() {}
	}
	if cfg.OnPending == nil {
		cfg.OnPending = func() {}
	}
	return &Store{pool: pool, q: dbq.New(), cfg: cfg}
}

// MaxAssignedPerInstallation is the configured cap (0: none).
func (s *Store) MaxAssignedPerInstallation() int { return s.cfg.MaxAssignedPerInstallation }

// LeaseTTL is the configured lease time-to-live.
func (s *Store) LeaseTTL() time.Duration { return s.cfg.LeaseTTL }

// now reads the queue clock at the database's precision.
func (s *Store) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Microsecond) }

// InTx runs fn in a transaction and commits it if fn returns nil. Callers
// that must write their own rows atomically with a queue change (the webhook
// intake's delivery record) use it with the Store's *Tx methods.
// The functions given to AfterCommit in fn's ctx run after the commit.
// BEGIN goes to the database with fn's first statement, in one round trip
// (db/pgtx); tx does not nest.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	var hooks []func()
	err := pgtx.Run(ctx, s.pool, func(tx pgx.Tx) error {
		return fn(context.WithValue(ctx, afterCommitKey{}, &hooks), tx)
	})
	if err == nil {
		for _, h := range hooks {
			h()
		}
	}
	return err
}

// afterCommitKey carries the after-commit hooks of the transaction InTx runs.
type afterCommitKey struct{}

// AfterCommit registers fn to run once the Store.InTx transaction ctx
// belongs to has committed; it never runs if that transaction rolls back.
// An Observer uses it to signal what it wrote (a NOTIFY after the commit,
// never inside it). Outside such a transaction fn runs at once. fn must
// not block.
func AfterCommit(ctx context.Context, fn func()) {
	if hooks, ok := ctx.Value(afterCommitKey{}).(*[]func()); ok {
		*hooks = append(*hooks, fn)
		return
	}
	fn()
}

// maxConflictRetries bounds how often a transaction that lost a unique-index
// race is re-run; the re-run sees the winner and answers from it.
const maxConflictRetries = 5

// TxFunc is the body of a RunTx transaction. attempt is 0 on the first run
// and counts the re-runs after lost races. It reports whether the
// transaction made an item pending (created, released or returned), so that
// RunTx can wake idle workers once it has committed.
type TxFunc func(ctx context.Context, tx pgx.Tx, attempt int) (pending bool, err error)

// RunTx runs fn in a transaction and commits it if fn returns nil. When fn
// or the commit fails with an error for which IsRetryable is true (a
// concurrent writer won a unique-index race), RunTx runs fn again in a
// fresh transaction, up to maxConflictRetries more times, and the re-run
// answers from the winner. Enqueue, lease and the webhook intake run
// through it; the other calls run once in InTx, and the fenced mutations
// (fenced.go) retry on their own terms: a compare-and-swap that took no
// row is decided from the stored row, and tried again only when that row
// changed in between.
// After a commit for which fn reported pending, it calls Config.OnPending,
// outside the transaction. Callers that write their own rows atomically with
// a queue change (the webhook intake's delivery record) use it with the
// Store's *Tx methods. It returns fn's or the commit's last error.
func (s *Store) RunTx(ctx context.Context, fn TxFunc) error {
	for attempt := 0; ; attempt++ {
		var pending bool
		err := s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) (err error) {
			pending, err = fn(ctx, tx, attempt)
			return err
		})
		if err == nil {
			if pending {
				s.cfg.OnPending()
			}
			return nil
		}
		if !IsRetryable(err) || attempt >= maxConflictRetries {
			return err
		}
	}
}

// retryOnConflict is RunTx for a body that makes nothing pending.
func (s *Store) retryOnConflict(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return s.RunTx(ctx, func(ctx context.Context, tx pgx.Tx, _ int) (bool, error) { return false, fn(ctx, tx) })
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// interpretError turns no-rows into ErrNotFound and wraps everything with what
// was being done.
func interpretError(what string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return fmt.Errorf("%s: %w", what, err)
}

// sweep drops pending entries whose expire_after_secs has run out.
func (s *Store) sweep(ctx context.Context, tx pgx.Tx, now time.Time) error {
	rows, err := s.q.WorkItemSweepExpired(ctx, tx, now)
	if err != nil {
		return fmt.Errorf("sweep expired entries: %w", err)
	}
	for _, w := range rows {
		if err := s.swept(ctx, tx, now, w); err != nil {
			return err
		}
	}
	return nil
}

// swept records an item the expiry sweep dropped.
func (s *Store) swept(ctx context.Context, tx pgx.Tx, now time.Time, w dbq.WorkItem) error {
	if err := s.audit(ctx, tx, w.ID, now, "expiry-sweep", StatusPending, StatusDropped, ""); err != nil {
		return err
	}
	if err := s.cfg.Observer.Finished(ctx, tx, Item{row: w}); err != nil {
		return fmt.Errorf("observe swept item: %w", err)
	}
	return nil
}

// Get returns the item with the given entry ID, live or finished.
// It returns ErrNotFound when there is none.
func (s *Store) Get(ctx context.Context, entryID string) (Item, error) {
	id, err := uuid.Parse(entryID)
	if err != nil {
		return Item{}, ErrNotFound
	}
	w, err := s.q.WorkItemGet(ctx, s.pool, id)
	if err != nil {
		return Item{}, interpretError("get work item", err)
	}
	return Item{row: w}, nil
}

// View returns the item with entryID in its gitlease/entry/get form,
// decorated by Config.Views. It returns ErrNotFound for an unknown ID.
func (s *Store) View(ctx context.Context, entryID string) (View, error) {
	it, err := s.Get(ctx, entryID)
	if err != nil {
		return View{}, err
	}
	v := it.View()
	if s.cfg.Views != nil {
		if err := s.cfg.Views.DecorateView(ctx, &v); err != nil {
			return View{}, fmt.Errorf("view entry %s: %w", entryID, err)
		}
	}
	return v, nil
}

// audit records a status change made for a reason in the item's audit log.
func (s *Store) audit(ctx context.Context, tx dbq.DBTX, id uuid.UUID, at time.Time, method, from, to, reason string) error {
	p := dbq.WorkItemAuditInsertParams{EntryID: id, At: at, Method: method, FromStatus: from, ToStatus: to}
	if reason != "" {
		p.Reason = &reason
	}
	err := s.q.WorkItemAuditInsert(ctx, tx, p)
	if err != nil {
		return fmt.Errorf("record audit of %s: %w", method, err)
	}
	return nil
}

// timed reports one operation to Config.OnOp; use as
// defer s.timed("lease", time.Now(), &err).
func (s *Store) timed(op string, start time.Time, err *error) {
	s.cfg.OnOp(op, time.Since(start), *err)
}

// AtCommit returns tx for a statement whose result its caller does not need
// until the commit: in an InTx transaction the statement goes to the
// database with COMMIT, in one round trip (see db/pgtx.AtCommit).
func AtCommit(tx pgx.Tx) dbq.DBTX { return pgtx.AtCommit(tx) }
