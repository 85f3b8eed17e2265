package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gitlease/gitlease/db/dbq"
)

// Pruner defaults.
const (
	DefaultRetention     = 30 * 24 * time.Hour
	DefaultPruneInterval = time.Hour
	DefaultPruneBatch    = 1000
)

// PrunerConfig configures a Pruner. The zero value is usable.
type PrunerConfig struct {
	// Retention is how long a delivery row is kept after it was first
	// received (GITLEASE_DELIVERY_RETENTION). Default 30 days.
	Retention time.Duration
	// Interval is the time between prune runs. Default one hour.
	Interval time.Duration
	// BatchSize bounds the rows one DELETE removes, so a large backlog is
	// removed in short transactions that never hold many row locks. Default
	// 1000.
	BatchSize int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Pruner deletes delivery records older than the retention age in the
// background. Work items are not touched: they are the queue's history.
type Pruner struct {
	db     dbq.DBTX
	q      *dbq.Queries
	cfg    PrunerConfig
	logger *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewPruner returns a Pruner over db (a pool), filling in cfg's defaults.
func NewPruner(db dbq.DBTX, logger *slog.Logger, cfg PrunerConfig) *Pruner {
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultPruneInterval
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultPruneBatch
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Pruner{db: db, q: dbq.New(), cfg: cfg, logger: logger}
}

// Start runs a prune at once and then every Interval, in the background,
// until ctx ends or Stop is called. It returns at once; starting a running
// Pruner does nothing.
func (p *Pruner) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		return nil
	}
	ctx, p.cancel = context.WithCancel(ctx)
	p.done = make(chan struct{})
	go p.loop(ctx, p.done)
	return nil
}

// Stop cancels the background work and waits until it has exited. Stopping
// twice, or a Pruner never started, is safe; it can be started again after.
func (p *Pruner) Stop() {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.cancel, p.done = nil, nil
	p.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (p *Pruner) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	ticker := time.NewTicker(p.cfg.Interval)
	defer ticker.Stop()
	for {
		n, err := p.RunOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			p.logger.Warn("prune deliveries", "err", err, "deleted", n)
		case n > 0:
			p.logger.Info("pruned deliveries", "deleted", n, "retention", p.cfg.Retention.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// RunOnce deletes every delivery received before now minus the retention,
// a batch at a time, and returns how many it deleted. An error stops it
// part way; the rows deleted so far stay deleted.
func (p *Pruner) RunOnce(ctx context.Context) (int64, error) {
	before := p.cfg.Now().Add(-p.cfg.Retention)
	var total int64
	for {
		n, err := p.q.DeliveryPrune(ctx, p.db, dbq.DeliveryPruneParams{Before: before, Batch: int32(p.cfg.BatchSize)})
		total += n
		if err != nil {
			return total, fmt.Errorf("prune deliveries received before %s: %w", before.UTC().Format(time.RFC3339), err)
		}
		if n < int64(p.cfg.BatchSize) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("prune deliveries: %w", err)
		}
	}
}
