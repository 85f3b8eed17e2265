package webhook

import (
	"context"
	"fmt"
	"log/slog"
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

// Pruner deletes delivery records older than the retention age. Work items
// are not touched: they are the queue's history.
type Pruner struct {
	db     dbq.DBTX
	q      *dbq.Queries
	cfg    PrunerConfig
	logger *slog.Logger
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
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Pruner{db: db, q: dbq.New(), cfg: cfg, logger: logger}
}

// Run prunes once and logs what it deleted; it is the Run of the periodic
// service cmd/gitlease schedules every Interval (app/service.Periodic).
func (p *Pruner) Run(ctx context.Context) error {
	n, err := p.RunOnce(ctx)
	if n > 0 {
		p.logger.InfoContext(ctx, "pruned deliveries", "deleted", n, "retention", p.cfg.Retention.String())
	}
	return err
}

// Interval is the time between prune runs.
func (p *Pruner) Interval() time.Duration { return p.cfg.Interval }

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
