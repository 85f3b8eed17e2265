package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// NotifyGap is the least time between two notifications of one Notifier.
// A signal after a quiet spell is sent at once; under load the signals of
// each gap become one NOTIFY. Each NOTIFY is a committed transaction of
// its own (with a WAL flush) and wakes every listener, which at a thousand
// enqueues a second cost more than the wake-ups are worth: a woken worker
// leases up to five items, and an idle one learns of new work at most this
// much later.
const NotifyGap = 10 * time.Millisecond

// Notifier sends NOTIFY on one channel whenever Signal asks, coalescing
// the signals that arrive while one is being sent, or within NotifyGap of
// the last one, into the next one. It sends outside the callers'
// transactions (call Signal after the commit), so they never wait on
// Postgres's notification lock.
type Notifier struct {
	pool    *pgxpool.Pool
	channel string
	logger  *slog.Logger
	kick    chan struct{}

	Service
}

// NewNotifier returns a Notifier sending on channel through pool.
func NewNotifier(pool *pgxpool.Pool, channel string, logger *slog.Logger) *Notifier {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{pool: pool, channel: channel, logger: logger, kick: make(chan struct{}, 1)}
}

// Signal asks for a notification soon. It never blocks.
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
		if _, err := n.pool.Exec(ctx, "SELECT pg_notify($1, '')", n.channel); err != nil && ctx.Err() == nil {
			n.logger.WarnContext(ctx, "could not notify; listeners will poll", "channel", n.channel, "err", err)
		}
		// Signals until the gap ends wait in kick as one.
		select {
		case <-ctx.Done():
			return
		case <-time.After(NotifyGap):
		}
	}
}

// Listener calls Wake on every NOTIFY on Channel, over a connection of its
// own made with Pool's settings (db.PoolConfig's: only to a server that
// takes writes, so never to a standby), reconnecting with backoff when it fails
// (and calling Wake once reconnected: notifications may have been missed).
type Listener struct {
	Pool    *pgxpool.Pool
	Channel string
	Wake    func()
	Logger  *slog.Logger
}

// Connect opens the LISTEN connection. Run retries on its own if it fails.
func (l *Listener) Connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, l.Pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect for LISTEN: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.Channel}.Sanitize()); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("LISTEN %s: %w", l.Channel, err)
	}
	return conn, nil
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// Run calls Wake on every notification until ctx ends, starting on conn
// (nil: connect first) and closing it at the end.
func (l *Listener) Run(ctx context.Context, conn *pgx.Conn) {
	logger := l.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// At most 4 s (4.8 with the jitter) between attempts: a standby
	// promoted after a long outage is listened on within 5 s (SPEC §9.1).
	retry := &backoff.ExponentialBackOff{InitialInterval: time.Second, RandomizationFactor: 0.2,
		Multiplier: 2, MaxInterval: 4 * time.Second}
	retry.Reset()
	wait := retry.NextBackOff()
	for {
		if conn == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			var err error
			if conn, err = l.Connect(ctx); err != nil {
				wait = retry.NextBackOff()
				if ctx.Err() == nil {
					logger.WarnContext(ctx, "cannot listen; polling meanwhile", "channel", l.Channel, "err", err, "retry_in", wait.String())
				}
				continue
			}
			retry.Reset()
			wait = retry.NextBackOff()
			l.Wake() // notifications may have been missed while disconnected
		}
		_, err := conn.WaitForNotification(ctx)
		if err == nil {
			l.Wake()
			continue
		}
		closeConn(conn)
		conn = nil
		if ctx.Err() != nil {
			return
		}
		logger.WarnContext(ctx, "lost the LISTEN connection; reconnecting", "channel", l.Channel, "err", err)
	}
}
