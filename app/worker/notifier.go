package worker

import (
	"context"
	"log/slog"

	"github.com/gitlease/gitlease/app/service"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Notifier wakes idle workers in every process when items become pending:
// it sends NOTIFY gitlease_work, coalescing any number of signals that
// arrive while one is being sent into the next one. It runs outside the
// enqueue transactions, so they never wait on Postgres's notification lock.
type Notifier struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	kick   chan struct{}

	service.Service
}

// NewNotifier returns a Notifier sending on pool.
func NewNotifier(pool *pgxpool.Pool, logger *slog.Logger) *Notifier {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{pool: pool, logger: logger, kick: make(chan struct{}, 1)}
}

// Signal asks for a notification soon. It never blocks (queue.Config.OnPending).
func (n *Notifier) Signal() {
	select {
	case n.kick <- struct{}{}:
	default: // one is already due
	}
}

// Start sends notifications in the background until Stop or ctx ends.
func (n *Notifier) Start(ctx context.Context) error {
	return n.Service.Start(ctx, n.loop)
}

func (n *Notifier) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		}
		if _, err := n.pool.Exec(ctx, "SELECT pg_notify('"+NotifyChannel+"', '')"); err != nil && ctx.Err() == nil {
			n.logger.WarnContext(ctx, "could not notify workers; they will poll", "err", err)
		}
	}
}
