// Package prune is the one batch pruner: it deletes the rows of one table
// older than a retention, a bounded batch per statement, so a large backlog
// goes in short transactions that never hold many row locks. The table's
// owner supplies the statement (webhook's deliveries, app/outbox's sent
// rows) and its defaults; cmd/gitlease runs Run every Interval as a
// periodic service. Several instances may prune at once: each row is
// deleted once.
package prune

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Delete deletes at most batch rows older than before and returns how many
// it deleted.
type Delete func(ctx context.Context, before time.Time, batch int32) (int64, error)

// Config is a pruner's schedule. Zero fields take the owner's defaults.
type Config struct {
	// Retention is how long a row is kept.
	Retention time.Duration
	// Interval is the time between prune runs.
	Interval time.Duration
	// Batch bounds the rows one statement deletes.
	Batch int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Pruner deletes what its Delete finds older than the retention.
type Pruner struct {
	what   string
	delete Delete
	cfg    Config
	logger *slog.Logger
}

// New returns a pruner of what ("deliveries", "sent outbox rows") through
// del, with cfg's zero fields taken from defaults.
func New(what string, del Delete, cfg, defaults Config, logger *slog.Logger) *Pruner {
	if cfg.Retention <= 0 {
		cfg.Retention = defaults.Retention
	}
	if cfg.Interval <= 0 {
		cfg.Interval = defaults.Interval
	}
	if cfg.Batch <= 0 {
		cfg.Batch = defaults.Batch
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Pruner{what: what, delete: del, cfg: cfg, logger: logger}
}

// Interval is the time between prune runs.
func (p *Pruner) Interval() time.Duration { return p.cfg.Interval }

// Run prunes once and logs what it deleted.
func (p *Pruner) Run(ctx context.Context) error {
	n, err := p.RunOnce(ctx)
	if n > 0 {
		p.logger.InfoContext(ctx, "pruned "+p.what, "deleted", n, "retention", p.cfg.Retention.String())
	}
	return err
}

// RunOnce deletes every row older than now minus the retention, a batch at
// a time, and returns how many it deleted. An error stops it part way; the
// rows deleted so far stay deleted.
func (p *Pruner) RunOnce(ctx context.Context) (int64, error) {
	before := p.cfg.Now().Add(-p.cfg.Retention)
	var total int64
	for {
		n, err := p.delete(ctx, before, int32(p.cfg.Batch))
		total += n
		if err != nil {
			return total, fmt.Errorf("prune %s older than %s: %w", p.what, before.UTC().Format(time.RFC3339), err)
		}
		if n < int64(p.cfg.Batch) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("prune %s: %w", p.what, err)
		}
	}
}
