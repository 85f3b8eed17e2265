package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// benchArgs is the River job: its key is its uniqueness (UniqueOpts.ByArgs).
type benchArgs struct {
	Key string `json:"key"`
}

func (benchArgs) Kind() string { return "queuebench_noop" }

// noopWorker completes every job at once.
type noopWorker struct {
	river.WorkerDefaults[benchArgs]
}

func (noopWorker) Work(context.Context, *river.Job[benchArgs]) error { return nil }

// uniqueOpts makes a job unique by its args, with River's default unique
// states (available, completed, pending, retryable, running, scheduled): a
// key stays taken after its job completes, as a gitlease idempotency key does.
var uniqueOpts = &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}

// riverSys is River on its own database.
type riverSys struct {
	pool    *pgxpool.Pool
	tracer  *sqlTracer
	o       options
	inserts *river.Client[pgx.Tx] // insert-only client (no queues)
	logger  *slog.Logger
}

func newRiver(ctx context.Context, cfg *pgxpool.Config, o options) (*riverSys, error) {
	r := &riverSys{o: o, logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if o.sqlStats {
		r.tracer = newSQLTracer()
		cfg.ConnConfig.Tracer = r.tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("river: connect: %w", err)
	}
	r.pool = pool
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: r.logger})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("river: migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		pool.Close()
		return nil, fmt.Errorf("river: migrate: %w", err)
	}
	r.inserts, err = river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: r.logger})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("river: insert client: %w", err)
	}
	return r, nil
}

func (r *riverSys) name() string { return "river" }

func (r *riverSys) close() { r.pool.Close() }

func (r *riverSys) reset(ctx context.Context) error {
	_, err := r.pool.Exec(ctx, "TRUNCATE river_job")
	r.tracer.take()
	return err
}

func (r *riverSys) key(round, i int) string { return fmt.Sprintf("bench-r%d-%d", round, i) }

// enqueue inserts n unique jobs from o.concurrency goroutines, then checks
// (untimed) that a repeat of one key is skipped as a duplicate.
func (r *riverSys) enqueue(ctx context.Context, round int) (result, error) {
	r.tracer.take()
	var next atomic.Int64
	start := time.Now()
	err := parallel(ctx, r.o.concurrency, func(ctx context.Context) error {
		for {
			i := int(next.Add(1)) - 1
			if i >= r.o.n {
				return nil
			}
			res, err := r.inserts.Insert(ctx, benchArgs{Key: r.key(round, i)}, uniqueOpts)
			if err != nil {
				return fmt.Errorf("insert %d: %w", i, err)
			}
			if res.UniqueSkippedAsDuplicate {
				return fmt.Errorf("insert %d: skipped as a duplicate", i)
			}
		}
	})
	elapsed := time.Since(start)
	stats := r.tracer.take()
	if err != nil {
		return result{}, err
	}
	res, err := r.inserts.Insert(ctx, benchArgs{Key: r.key(round, 0)}, uniqueOpts)
	if err != nil || !res.UniqueSkippedAsDuplicate {
		return result{}, fmt.Errorf("repeat of key %s: err=%v, skipped=%v (want skipped as a duplicate)", r.key(round, 0), err, res != nil && res.UniqueSkippedAsDuplicate)
	}
	var available int
	if err := r.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'available'").Scan(&available); err != nil {
		return result{}, err
	}
	if available != r.o.n {
		return result{}, fmt.Errorf("%d available jobs after insert, want %d", available, r.o.n)
	}
	r.tracer.take()
	return result{jobs: r.o.n, elapsed: elapsed, stats: stats}, nil
}

// drain starts a client with one queue of o.workers workers and a no-op
// worker, and times from just before Start until it has reported every job
// completed. River reports a completion once its (batching) completer has
// committed it, so the count is of durable completions.
func (r *riverSys) drain(ctx context.Context, round int) (result, error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(r.pool), &river.Config{
		Logger:  r.logger,
		Workers: workers,
		Queues: map[string]river.QueueConfig{
			river.QueueDefault: {
				MaxWorkers:        r.o.workers,
				FetchCooldown:     r.o.riverFetch.cooldown,
				FetchPollInterval: r.o.riverFetch.poll,
			},
		},
		// Client-level defaults too, for anything not per queue.
		FetchCooldown:     r.o.riverFetch.cooldown,
		FetchPollInterval: r.o.riverFetch.poll,
	})
	if err != nil {
		return result{}, fmt.Errorf("new client: %w", err)
	}
	events, cancelSub := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: r.o.n + 1000, // never drop an event
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
	})
	defer cancelSub()

	r.tracer.take()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return result{}, fmt.Errorf("start: %w", err)
	}
	completed := 0
	var runErr error
	timeout := time.NewTimer(10 * time.Minute)
	defer timeout.Stop()
	for completed < r.o.n && runErr == nil {
		select {
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				runErr = fmt.Errorf("job %d: %s", ev.Job.ID, ev.Kind)
				break
			}
			completed++
		case <-ctx.Done():
			runErr = ctx.Err()
		case <-timeout.C:
			runErr = fmt.Errorf("only %d of %d jobs completed after 10 minutes", completed, r.o.n)
		}
	}
	elapsed := time.Since(start)
	stats := r.tracer.take()
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil && runErr == nil {
		runErr = fmt.Errorf("stop: %w", err)
	}
	if runErr != nil {
		return result{}, runErr
	}
	var done int
	if err := r.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&done); err != nil {
		return result{}, err
	}
	if done != r.o.n {
		return result{}, fmt.Errorf("%d jobs completed in the database, want %d", done, r.o.n)
	}
	return result{jobs: r.o.n, elapsed: elapsed, stats: stats}, nil
}
