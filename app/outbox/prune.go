package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gitlease/gitlease/app/service"
	"github.com/gitlease/gitlease/db/dbq"
)

// OutboxPrunerConfig configures NewOutboxPruner. Zero fields take the
// defaults shown.
type OutboxPrunerConfig struct {
	// Retention is how long a sent (done) outbox row is kept, for the
	// dashboard's history of an item's GitHub writes; 7 days (168h).
	// Failed rows are never pruned.
	Retention time.Duration
	// Interval is how often the pruner runs; 10 minutes.
	Interval time.Duration
	// Batch bounds the rows one statement deletes, so pruning a large
	// backlog never holds one long transaction; 1000.
	Batch int32
}

// NewOutboxPruner returns a service that deletes outbox rows sent longer
// than cfg.Retention ago, at start and then every cfg.Interval, in batches,
// so the outbox holds the backlog and recent history rather than every
// write ever made. Several instances may run it at once: each row is
// deleted once.
func NewOutboxPruner(db dbq.DBTX, cfg OutboxPrunerConfig, logger *slog.Logger) *service.Periodic {
	if cfg.Retention <= 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Minute
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	return &service.Periodic{Name: "outbox pruner", Interval: cfg.Interval, Logger: logger,
		Run: func(ctx context.Context) error {
			_, err := PruneOutbox(ctx, db, time.Now().Add(-cfg.Retention), cfg.Batch)
			return err
		}}
}

// PruneOutbox deletes the outbox rows sent before before, batch at a time,
// and returns how many it deleted. It returns the first database error.
func PruneOutbox(ctx context.Context, db dbq.DBTX, before time.Time, batch int32) (int64, error) {
	q := dbq.New()
	var total int64
	for {
		n, err := q.OutboxPruneDone(ctx, db, dbq.OutboxPruneDoneParams{Before: before, Batch: batch})
		if err != nil {
			return total, fmt.Errorf("prune sent outbox rows: %w", err)
		}
		total += n
		if n < int64(batch) || ctx.Err() != nil {
			return total, nil
		}
	}
}
