package worker

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/app/service"
)

// NewNotifier returns the notifier that wakes idle workers in every process
// when items become pending: it sends NOTIFY gitlease_work on pool,
// coalescing signals, outside the enqueue transactions. Its Signal is
// queue.Config.OnPending.
func NewNotifier(pool *pgxpool.Pool, logger *slog.Logger) *service.Notifier {
	return service.NewNotifier(pool, NotifyChannel, logger)
}

// NewCancelNotifier returns the notifier that tells the built-in workers of
// every process to renew their running items now: it sends NOTIFY
// gitlease_cancel on pool. Its Signal is queue.Config.OnCancel.
func NewCancelNotifier(pool *pgxpool.Pool, logger *slog.Logger) *service.Notifier {
	return service.NewNotifier(pool, CancelChannel, logger)
}
