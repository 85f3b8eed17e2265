package worker

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/app/service"
)

// Notifier wakes idle workers in every process when items become pending:
// it sends NOTIFY gitlease_work (service.Notifier), coalescing signals,
// outside the enqueue transactions. Its Signal is queue.Config.OnPending.
type Notifier = service.Notifier

// NewNotifier returns a Notifier sending NOTIFY gitlease_work on pool.
func NewNotifier(pool *pgxpool.Pool, logger *slog.Logger) *Notifier {
	return service.NewNotifier(pool, NotifyChannel, logger)
}
