package webhook

import (
	"context"
	"log/slog"
	"time"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/db/prune"
)

// NewPruner returns the pruner of delivery records over db (a pool): a
// delivery is kept for cfg.Retention after it was first received
// (GITLEASE_DELIVERY_RETENTION; 30 days), pruned every hour, 1000 rows a
// statement. Work items are not touched: they are the queue's history.
func NewPruner(db dbq.DBTX, cfg prune.Config, logger *slog.Logger) *prune.Pruner {
	q := dbq.New()
	del := func(ctx context.Context, before time.Time, batch int32) (int64, error) {
		return q.DeliveryPrune(ctx, db, dbq.DeliveryPruneParams{Before: before, Batch: batch})
	}
	return prune.New("deliveries", del, cfg, prune.Config{Retention: 30 * 24 * time.Hour, Interval: time.Hour, Batch: 1000}, logger)
}
