package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// baselineTable is where the baseline writes; it lives next to gitlease's
// tables in serve's database and is not gitlease's.
const baselineTable = `CREATE TABLE IF NOT EXISTS load_baseline (id bigserial primary key, delivery_id text, body bytea)`

// runBaseline measures the durable-commit floor: at opts.Concurrency, one
// transaction per request (BEGIN, INSERT, COMMIT) inserting a delivery ID
// and the same bodies the HTTP load sends into a plain table. No HTTP, no
// verification, no queue: what any receiver that stores deliveries durably
// must at least pay.
func runBaseline(ctx context.Context, opts Options, gen *generator) (*Stats, error) {
	cfg, err := pgxpool.ParseConfig(opts.DSN)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL is not a valid PostgreSQL connection string")
	}
	cfg.MaxConns = int32(opts.Concurrency)
	cfg.MinConns = int32(opts.Concurrency)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, baselineTable); err != nil {
		return nil, fmt.Errorf("create load_baseline: %w", err)
	}
	if err := warm(ctx, pool, opts.Concurrency); err != nil {
		return nil, err
	}

	// The bodies alternate between issues and pull requests like the HTTP
	// load's fresh deliveries; they are rendered in the timed loop, as the
	// HTTP workers render theirs.
	type result struct {
		lat  time.Duration
		size int
		err  error
	}
	results := make([][]result, opts.Concurrency)
	start := time.Now()
	slots := pace(ctx, opts, start)
	var wg sync.WaitGroup
	for w := range opts.Concurrency {
		wg.Go(func() {
			for i := range slots {
				kind := issueOpened
				if i%2 == 1 {
					kind = prOpened
				}
				d := delivery{ID: uuid.NewString(), Kind: kind, Repo: i % gen.repos, Number: i + 1}
				body := gen.body(d)
				t := time.Now()
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, `INSERT INTO load_baseline (delivery_id, body) VALUES ($1, $2)`, d.ID, body)
					return err
				})
				results[w] = append(results[w], result{lat: time.Since(t), size: len(body), err: err})
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("baseline interrupted: %w", err)
	}
	s := &Stats{Name: "baseline", Concurrency: opts.Concurrency, Rate: opts.Rate, Elapsed: elapsed, ByStatus: map[string]int{}}
	var lat []time.Duration
	total := 0
	var firstErr error
	for _, rs := range results {
		for _, r := range rs {
			lat = append(lat, r.lat)
			total += r.size
			if r.err != nil {
				s.ByStatus["error"]++
				if firstErr == nil {
					firstErr = r.err
				}
			} else {
				s.ByStatus["committed"]++
			}
		}
	}
	s.Requests = len(lat)
	if s.Requests > 0 {
		s.BodyBytes = total / s.Requests
	}
	s.Latencies = sortLatencies(lat)
	if firstErr != nil {
		return s, fmt.Errorf("%d of %d inserts failed, the first: %w", s.ByStatus["error"], s.Requests, firstErr)
	}
	return s, nil
}

// warm opens n connections before the clock starts, as serve's pool is
// open when the HTTP load starts.
func warm(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}
