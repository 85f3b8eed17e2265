package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/db"
	"github.com/gitlease/gitlease/queue"
)

// gitleaseSys is gitlease's queue (queue.Store) on its own database.
type gitleaseSys struct {
	pool   *pgxpool.Pool
	store  *queue.Store
	tracer *sqlTracer
	o      options
	at     time.Time // requested_at of every dispatch
}

func newGitlease(ctx context.Context, cfg *pgxpool.Config, o options) (*gitleaseSys, error) {
	g := &gitleaseSys{o: o, at: time.Now().UTC().Truncate(time.Second)}
	if o.sqlStats {
		g.tracer = newSQLTracer()
		cfg.ConnConfig.Tracer = g.tracer
	}
	if o.whatIf["custom-plans"] {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	}
	cfg.AfterConnect = db.AfterConnect // as serve's pools
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("gitlease: connect: %w", err)
	}
	g.pool = pool
	if _, err := db.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("gitlease: migrate: %w", err)
	}
	if o.whatIf["no-notify"] {
		if _, err := pool.Exec(ctx, "ALTER TABLE work_items DISABLE TRIGGER work_items_pending_notify"); err != nil {
			pool.Close()
			return nil, fmt.Errorf("gitlease: what-if no-notify: %w", err)
		}
	}
	g.store = queue.NewStore(pool, queue.Config{LeaseTTL: 5 * time.Minute})
	return g, nil
}

func (g *gitleaseSys) name() string { return "gitlease" }

func (g *gitleaseSys) close() { g.pool.Close() }

func (g *gitleaseSys) reset(ctx context.Context) error {
	_, err := g.pool.Exec(ctx, "TRUNCATE work_item_audit, work_item_endings, github_items, work_items, subject_generations, lease_installations")
	g.tracer.take()
	return err
}

func (g *gitleaseSys) key(round, i int) string { return fmt.Sprintf("bench-r%d-%d", round, i) }

func (g *gitleaseSys) params(round, i int) queue.EnqueueParams {
	return queue.EnqueueParams{
		Dispatch: queue.SubjectDispatch{
			Subject:       &queue.SubjectRef{Kind: "github_issue", ID: fmt.Sprintf("bench/repo#%d-%d", round, i)},
			WorkflowRef:   "coding",
			TriggerSource: "bench",
			RequestedAt:   queue.Timestamp{Time: g.at},
		},
		IdempotencyKey: g.key(round, i),
	}
}

// enqueue creates n items, each with its own idempotency key and subject,
// from o.concurrency goroutines, then checks (untimed) that a repeat of one
// key is answered as a replay.
func (g *gitleaseSys) enqueue(ctx context.Context, round int) (result, error) {
	g.tracer.take()
	var next atomic.Int64
	start := time.Now()
	err := parallel(ctx, g.o.concurrency, func(ctx context.Context) error {
		for {
			i := int(next.Add(1)) - 1
			if i >= g.o.n {
				return nil
			}
			if g.o.whatIf["enqueue-1stmt"] {
				if err := g.enqueueOneStatement(ctx, g.params(round, i)); err != nil {
					return fmt.Errorf("enqueue %d: %w", i, err)
				}
				continue
			}
			res, err := g.store.Enqueue(ctx, g.params(round, i))
			if err != nil {
				return fmt.Errorf("enqueue %d: %w", i, err)
			}
			if !res.Enqueued {
				return fmt.Errorf("enqueue %d: answered as a replay", i)
			}
		}
	})
	elapsed := time.Since(start)
	stats := g.tracer.take()
	if err != nil {
		return result{}, err
	}
	// Uniqueness is real: the same key again is a replay, not a new item.
	res, err := g.store.Enqueue(ctx, g.params(round, 0))
	if err != nil || res.Enqueued {
		return result{}, fmt.Errorf("repeat of key %s: enqueued=%v err=%v (want a replay)", g.key(round, 0), res.Enqueued, err)
	}
	var pending int
	if err := g.pool.QueryRow(ctx, "SELECT count(*) FROM work_items WHERE status = 'pending'").Scan(&pending); err != nil {
		return result{}, err
	}
	if pending != g.o.n {
		return result{}, fmt.Errorf("%d pending items after enqueue, want %d", pending, g.o.n)
	}
	g.tracer.take()
	if err := g.attachPlans(ctx, stats); err != nil {
		return result{}, err
	}
	return result{jobs: g.o.n, elapsed: elapsed, stats: stats}, nil
}

// enqueueOneStatement writes what Store.Enqueue writes for a new key and a
// new subject (the generation counter and the item, with the same columns,
// indexes and trigger) in one autocommit statement: one round trip, one
// commit. It is the floor a one-statement enqueue could reach on this schema
// (-gitlease-whatif enqueue-1stmt), not a replacement: it neither answers
// replays nor reports collisions.
func (g *gitleaseSys) enqueueOneStatement(ctx context.Context, p queue.EnqueueParams) error {
	qid, err := queue.CanonicalID(p.Dispatch.Subject.Kind, p.Dispatch.Subject.ID)
	if err != nil {
		return err
	}
	hash, err := queue.RequestHash(p.Dispatch, nil, nil, nil)
	if err != nil {
		return err
	}
	dispatch, err := json.Marshal(p.Dispatch)
	if err != nil {
		return err
	}
	_, err = g.pool.Exec(ctx, `WITH gen AS (
		INSERT INTO subject_generations (qualified_id, last_generation) VALUES ($1, 1)
		ON CONFLICT (qualified_id) DO UPDATE SET last_generation = subject_generations.last_generation + 1
		RETURNING last_generation)
	INSERT INTO work_items (id, status, is_v2, subject_id, canonical_id, subject_generation, dispatch,
		enqueued_at, idempotency_key, request_hash)
	SELECT $2, 'pending', true, $1, $1, gen.last_generation, $3, $4, $5, $6 FROM gen`,
		qid, uuid.New(), dispatch, time.Now().UTC(), p.IdempotencyKey, hash)
	return err
}

// drain works every pending item to completion with o.workers goroutines,
// each looping Lease(max) with fresh workflow IDs and completing every fence
// it got, one by one, until a lease finds nothing left.
func (g *gitleaseSys) drain(ctx context.Context, round int) (result, error) {
	if g.o.whatIf["analyze"] {
		if _, err := g.pool.Exec(ctx, "ANALYZE work_items"); err != nil {
			return result{}, err
		}
		g.pool.Reset() // drop cached plans with the connections
	}
	g.tracer.take()
	var done atomic.Int64
	var worker atomic.Int64
	start := time.Now()
	err := parallel(ctx, g.o.workers, func(ctx context.Context) error {
		w := worker.Add(1)
		owner := fmt.Sprintf("bench-worker-%d", w)
		wfids := make([]string, g.o.leaseMax)
		for call := 0; ; call++ {
			for k := range wfids {
				wfids[k] = fmt.Sprintf("wf-r%d-w%d-%d-%d", round, w, call, k)
			}
			res, err := g.store.Lease(ctx, queue.LeaseParams{Max: g.o.leaseMax, OwnerID: owner, WorkflowIDs: wfids})
			if err != nil {
				return fmt.Errorf("lease: %w", err)
			}
			if len(res.Leased) == 0 {
				// Nothing pending is unlocked: what remains is being leased
				// by the other workers, who complete it.
				return nil
			}
			for _, fe := range res.Leased {
				r, err := g.store.Complete(ctx, queue.CompleteParams{Execution: fe.Execution, Status: queue.StatusCompleted})
				if err != nil {
					return fmt.Errorf("complete: %w", err)
				}
				if r.Outcome != queue.OutcomeApplied {
					return fmt.Errorf("complete %s: outcome %s (%s)", fe.Entry.EntryID, r.Outcome, r.Reason)
				}
				done.Add(1)
			}
		}
	})
	elapsed := time.Since(start)
	stats := g.tracer.take()
	if err != nil {
		return result{}, err
	}
	var completed int
	if err := g.pool.QueryRow(ctx, "SELECT count(*) FROM work_items WHERE status = 'completed'").Scan(&completed); err != nil {
		return result{}, err
	}
	if completed != g.o.n || int(done.Load()) != g.o.n {
		return result{}, fmt.Errorf("%d items completed (%d by the workers), want %d", completed, done.Load(), g.o.n)
	}
	if err := g.attachPlans(ctx, stats); err != nil {
		return result{}, err
	}
	g.tracer.take()
	return result{jobs: g.o.n, elapsed: elapsed, stats: stats}, nil
}

// parallel runs fn in n goroutines and returns the first error; the others
// see their context cancelled.
func parallel(ctx context.Context, n int, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := fn(ctx); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// attachPlans adds the cached plans to stats (nil unless -sqlstats).
func (g *gitleaseSys) attachPlans(ctx context.Context, stats *phaseStats) error {
	if stats == nil {
		return nil
	}
	plans, err := g.cachedPlans(ctx)
	if err != nil {
		return fmt.Errorf("read cached plans: %w", err)
	}
	stats.plans = plans
	return nil
}

// cachedPlans reports, for every sqlc query gitlease's connections have
// prepared, how many connections run it with a cached generic plan and which
// scans that plan uses (-sqlstats). A generic plan is fixed when a connection
// first runs the statement a few times, so one chosen while the table was
// small stays in use as the table grows.
func (g *gitleaseSys) cachedPlans(ctx context.Context) ([]string, error) {
	conns := g.pool.AcquireAllIdle(ctx)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	type key struct{ query, scans string }
	count := map[key]int{}
	for _, c := range conns {
		rows, err := c.Query(ctx, `SELECT name, statement, cardinality(parameter_types), generic_plans, custom_plans
			FROM pg_prepared_statements WHERE statement LIKE '-- name: %'`)
		if err != nil {
			return nil, err
		}
		type stmt struct {
			name, text      string
			params          int
			generic, custom int64
		}
		var stmts []stmt
		for rows.Next() {
			var s stmt
			if err := rows.Scan(&s.name, &s.text, &s.params, &s.generic, &s.custom); err != nil {
				rows.Close()
				return nil, err
			}
			stmts = append(stmts, s)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		for _, s := range stmts {
			query := strings.Fields(strings.TrimPrefix(s.text, "-- name: "))[0]
			if s.generic == 0 {
				count[key{query, "custom plans"}]++
				continue
			}
			// The cached generic plan ignores the parameter values.
			args := strings.TrimSuffix(strings.Repeat("NULL,", s.params), ",")
			var scans []string
			plan, err := c.Query(ctx, "EXPLAIN EXECUTE "+pgx.Identifier{s.name}.Sanitize()+"("+args+")")
			if err != nil {
				return nil, err
			}
			for plan.Next() {
				var line string
				if err := plan.Scan(&line); err != nil {
					plan.Close()
					return nil, err
				}
				if m := scanRE.FindString(line); m != "" && !slices.Contains(scans, m) {
					scans = append(scans, m)
				}
			}
			plan.Close()
			if err := plan.Err(); err != nil {
				return nil, err
			}
			count[key{query, "generic: " + strings.Join(scans, ", ")}]++
		}
	}
	var out []string
	for k, n := range count {
		out = append(out, fmt.Sprintf("%-28s %2d conn(s)  %s", k.query, n, k.scans))
	}
	slices.Sort(out)
	return out, nil
}

var scanRE = regexp.MustCompile(`(Seq Scan on \w+|Index (Only )?Scan (Backward )?using \w+|Bitmap Index Scan on \w+)`)
