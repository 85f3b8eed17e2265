package outbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/db/prune"
)

// NewPruner returns the pruner of sent outbox rows over db (a pool), so
// the outbox holds the backlog and recent history rather than every write
// ever made: a done row is kept cfg.Retention (7 days) for the dashboard's
// history of an item's GitHub writes, pruned every 10 minutes, 1000 rows a
// statement. Failed rows are never pruned.
func NewPruner(db dbq.DBTX, cfg prune.Config, logger *slog.Logger) *prune.Pruner {
	q := dbq.New()
	del := func(ctx context.Context, before time.Time, batch int32) (int64, error) {
		return q.OutboxPruneDone(ctx, db, dbq.OutboxPruneDoneParams{Before: before, Batch: batch})
	}
	return prune.New("sent outbox rows", del, cfg, prune.Config{Retention: 7 * 24 * time.Hour, Interval: 10 * time.Minute, Batch: 1000}, logger)
}
