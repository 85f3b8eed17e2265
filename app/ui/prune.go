package ui

import (
	"context"
	"log/slog"
	"time"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/db/prune"
)

// NewSignOutPruner returns the pruner of sign-out records over db (a
// pool), on the one batch-pruner shape: a record goes a minute after its
// cookie expired (no cookie is accepted after expiry anyway), every 10
// minutes, 1000 rows a statement.
func NewSignOutPruner(db dbq.DBTX, logger *slog.Logger) *prune.Pruner {
	q := dbq.New()
	del := func(ctx context.Context, before time.Time, batch int32) (int64, error) {
		return q.UISignedOutPrune(ctx, db, dbq.UISignedOutPruneParams{Before: before, Batch: batch})
	}
	return prune.New("dashboard sign-outs", del, prune.Config{}, prune.Config{Retention: time.Minute, Interval: 10 * time.Minute, Batch: 1000}, logger)
}

// NewLoginFailurePruner returns the pruner of failed-sign-in rows over db
// (a pool): a row goes once its window started and its block ended five
// minutes ago (longer than serve's one-minute window and block), every 10
// minutes, 1000 rows a statement.
func NewLoginFailurePruner(db dbq.DBTX, logger *slog.Logger) *prune.Pruner {
	q := dbq.New()
	del := func(ctx context.Context, before time.Time, batch int32) (int64, error) {
		return q.UILoginFailuresPrune(ctx, db, dbq.UILoginFailuresPruneParams{Before: before, Batch: batch})
	}
	return prune.New("dashboard failed sign-ins", del, prune.Config{}, prune.Config{Retention: 5 * time.Minute, Interval: 10 * time.Minute, Batch: 1000}, logger)
}
