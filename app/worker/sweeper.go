package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gitlease/gitlease/app/service"

	"github.com/gitlease/gitlease/queue"
)

// ReasonLeaseExpired is the reason the Sweeper gives when it releases an
// expired lease of its own worker that the worker no longer runs.
const ReasonLeaseExpired = "lease expired"

// SweeperConfig configures a Sweeper. Zero fields take the defaults shown.
type SweeperConfig struct {
	// Interval is the time between sweeps; a sixth of the lease TTL, at
	// least 1s.
	Interval time.Duration
	// Batch is the most expired leases one sweep handles; 20.
	Batch int
}

// Sweeper recovers expired leases of built-in workers (owner IDs under
// BuiltinOwnerPrefix: a serve instance that died, or stopped without
// releasing) to its worker's owner ID, then has the worker resume the item,
// or releases it to pending when the worker has no free slot. Several
// instances may sweep at once: recovery is a compare-and-swap, so exactly
// one wins each lease and the others move on. Leases of other owners
// (outside workers over /rpc or stdio) are never touched.
type Sweeper struct {
	store  *queue.Store
	worker *Worker
	cfg    SweeperConfig
	logger *slog.Logger

	// Periodic runs RunOnce at Start and every Interval, until Stop.
	service.Periodic
}

// NewSweeper returns a Sweeper that recovers into worker, the built-in
// worker of this instance.
func NewSweeper(store *queue.Store, worker *Worker, cfg SweeperConfig, logger *slog.Logger) *Sweeper {
	if cfg.Interval <= 0 {
		cfg.Interval = max(store.LeaseTTL()/6, time.Second)
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 20
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Sweeper{store: store, worker: worker, cfg: cfg, logger: logger.With("owner_id", worker.OwnerID())}
	s.Periodic = service.Periodic{Name: "lease recovery sweep", Interval: cfg.Interval, Logger: s.logger,
		Run: func(ctx context.Context) error { _, err := s.RunOnce(ctx); return err }}
	return s
}

// SweepResult counts what one sweep did.
type SweepResult struct {
	Found    int // expired built-in leases seen
	Resumed  int // recovered and running in this worker
	Released int // recovered (or this worker's own) and released to pending
	Skipped  int // another instance won the race, or the lease came back to life
}

// RunOnce handles one batch of expired built-in leases. An expired lease of
// this worker's own owner ID that the worker no longer runs cannot be
// recovered to the same owner: it is released to pending instead.
func (s *Sweeper) RunOnce(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	items, err := s.store.ExpiredLeases(ctx, BuiltinOwnerPrefix, s.cfg.Batch)
	if err != nil {
		return res, fmt.Errorf("sweep expired leases: %w", err)
	}
	own := s.worker.OwnerID()
	for _, it := range items {
		f := it.Fence()
		if f == nil || f.QueueLease == nil {
			continue
		}
		res.Found++
		log := s.logger.With("entry_id", it.EntryID(), "qualified_id", it.QualifiedID(), "generation", it.Generation(),
			"expired_owner_id", f.QueueLease.OwnerID, "lease_generation", f.QueueLease.Generation)
		if f.QueueLease.OwnerID == own {
			if s.worker.Running(it.EntryID()) {
				res.Skipped++ // its job learns at the next renew and releases it
				continue
			}
			if s.release(ctx, log, *f, ReasonLeaseExpired) {
				res.Released++
			} else {
				res.Skipped++
			}
			continue
		}
		rec, err := s.store.Recover(ctx, queue.RecoverParams{Execution: *f, NewOwnerID: own})
		if err != nil {
			return res, fmt.Errorf("recover lease of entry %s: %w", it.EntryID(), err)
		}
		if rec.Outcome != queue.OutcomeApplied || rec.Execution == nil {
			log.DebugContext(ctx, "lease not recovered", "outcome", rec.Outcome, "reason", rec.Reason)
			res.Skipped++
			continue
		}
		log.InfoContext(ctx, "expired lease recovered", "new_lease_generation", rec.Execution.QueueLease.Generation)
		if s.worker.Resume(queue.FencedEntry{Entry: it.Entry(), Execution: *rec.Execution}) {
			res.Resumed++
			continue
		}
		if s.release(ctx, log, *rec.Execution, ReasonRecoveredNoSlot) {
			res.Released++
		} else {
			res.Skipped++
		}
	}
	if res.Found > 0 {
		s.logger.InfoContext(ctx, "lease recovery sweep", "found", res.Found, "resumed", res.Resumed,
			"released", res.Released, "skipped", res.Skipped)
	}
	return res, nil
}

// release returns a recovered item to pending, on a context that survives
// the sweeper's stop: a recovered lease left behind would wait a whole TTL.
func (s *Sweeper) release(ctx context.Context, log *slog.Logger, f queue.Fence, reason string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	r, err := s.store.ReleasePending(ctx, queue.ReleasePendingParams{Execution: f, Reason: reason})
	switch {
	case err != nil:
		log.ErrorContext(ctx, "could not release the lease to pending", "reason", reason, "err", err)
		return false
	case r.Outcome != queue.OutcomeApplied && r.Outcome != queue.OutcomeAlreadyApplied:
		log.DebugContext(ctx, "release not applied", "outcome", r.Outcome, "reason", r.Reason)
		return false
	}
	log.InfoContext(ctx, "lease released to pending", "reason", reason)
	return true
}
