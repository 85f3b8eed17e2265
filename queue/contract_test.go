package queue_test

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/gitlease/gitlease/db"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
)

// droppedColumns are the GitHub columns migration 00013 drops from
// work_items (their values live in github_items since 00004).
var droppedColumns = []string{"head_sha", "check_run_id", "branch", "pr_number", "pr_url", "provisioned_generation"}

// TestStoreAcrossTheWorkItemsContract: a Store of this release, started on
// a database at migration 00012 (the columns still there) with the
// additive migrations after 00013 that the Store needs (00015, 00016: fair
// share's table and functions, applied out of order), keeps
// enqueueing, leasing, renewing and completing while another process
// applies 00013 (the columns dropped), and every call succeeds. Its pool's
// statements are prepared before the drop and reused after it, as a
// running instance's are. A query naming a dropped column, as the previous
// release's generated SQL did, works before the migration and fails after
// it: that is why a rolling deploy from that release reaches 00013 only
// once no instance of it runs (docs/operations.md).
func TestStoreAcrossTheWorkItemsContract(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.EmptyURL(t)
	migrator := openPool(t, url)
	p, err := goose.NewProvider(goose.DialectPostgres, stdlib.OpenDBFromPool(migrator), db.Migrations(), goose.WithAllowOutofOrder(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 12); err != nil {
		t.Fatalf("migrate to 12: %v", err)
	}
	for _, v := range []int64{15, 16} {
		if _, err := p.ApplyVersion(ctx, v, true); err != nil {
			t.Fatalf("apply %05d before 00013: %v", v, err)
		}
	}
	if n := workItemColumns(t, migrator); n != len(droppedColumns) {
		t.Fatalf("at 00012 work_items has %d of the GitHub columns, want %d", n, len(droppedColumns))
	}
	const previousReleaseGet = `SELECT id, head_sha, check_run_id, branch, pr_number, pr_url, provisioned_generation FROM work_items LIMIT 1`
	if _, err := migrator.Exec(ctx, previousReleaseGet); err != nil {
		t.Fatalf("at 00012 the previous release's columns: %v", err)
	}
	// This release also writes columns that later expand migrations add
	// (trace_parent, 00017 and 00018). Those run before any instance of it
	// does (they add nullable columns, so the previous release runs on
	// them), so they are in place here too: their files run as they are
	// (IF NOT EXISTS), and goose applies them again, as no-ops, after 00013.
	for _, f := range []string{"00017_work_item_trace.sql", "00018_outbox_trace.sql"} {
		ddl, err := fs.ReadFile(db.Migrations(), f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := migrator.Exec(ctx, string(ddl)); err != nil {
			t.Fatalf("expand migration %s: %v", f, err)
		}
	}

	pool := openPool(t, url)
	s := queue.NewStore(pool, queue.Config{LeaseTTL: ttl})
	r := &contractRun{s: s}
	var enqueued atomic.Int64
	// round enqueues one item and leases, renews and completes what it can.
	round := func(w, i int) error {
		res, err := s.Enqueue(ctx, queue.EnqueueParams{Dispatch: issue(w*10000 + i),
			Reservation: reservation(fmt.Sprintf("refs/heads/gitlease/issue-%d-%d", w, i))})
		if err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		if !res.Enqueued {
			return fmt.Errorf("enqueue of a new subject not created: %+v", res)
		}
		enqueued.Add(1)
		return r.leaseAndComplete(ctx, fmt.Sprintf("owner-%d", w))
	}
	// Before: every statement the rounds use is prepared on the schema
	// that still has the columns.
	for i := range 3 {
		if err := round(0, i); err != nil {
			t.Fatalf("before 00013: %v", err)
		}
	}

	const workers, after = 4, 5
	migrated := make(chan struct{})
	started := sync.WaitGroup{}
	started.Add(workers)
	var migrateErr error
	go func() {
		started.Wait()            // every worker has run at least one round on 00012
		_, migrateErr = p.Up(ctx) // 00013 and what follows, out of order
		close(migrated)
	}()
	errs := make(chan error, workers)
	run(workers, func(w int) {
		w++ // worker 0 ran the rounds before
		for i := 0; ; i++ {
			if err := round(w, i); err != nil {
				errs <- fmt.Errorf("worker %d round %d: %w", w, i, err)
				if i == 0 {
					started.Done()
				}
				return
			}
			if i == 0 {
				started.Done()
			}
			select {
			case <-migrated:
				// A few more rounds on the contracted table, then stop.
				for j := 1; j <= after; j++ {
					if err := round(w, i+j); err != nil {
						errs <- fmt.Errorf("worker %d round %d after 00013: %w", w, i+j, err)
						return
					}
				}
				return
			default:
			}
		}
	})
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	<-migrated
	if migrateErr != nil {
		t.Fatalf("migrate to 00013 under load: %v", migrateErr)
	}
	// Whatever is still pending (another worker's lease took a round's
	// item, or took it while this one leased) is drained on the new schema.
	for {
		before := r.completed.Load()
		if err := r.leaseAndComplete(ctx, "drain"); err != nil {
			t.Fatalf("drain: %v", err)
		}
		if r.completed.Load() == before {
			break
		}
	}

	if n := workItemColumns(t, migrator); n != 0 {
		t.Errorf("after 00013 work_items still has %d of the GitHub columns", n)
	}
	if _, err := migrator.Exec(ctx, previousReleaseGet); err == nil {
		t.Errorf("after 00013 a query naming the dropped columns still works")
	}
	if enqueued.Load() < 3+workers*(after+1) {
		t.Errorf("only %d items enqueued", enqueued.Load())
	}
	var done, live int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'completed'),
		count(*) FILTER (WHERE status IN ('pending', 'assigned', 'held')) FROM work_items`).Scan(&done, &live); err != nil {
		t.Fatal(err)
	}
	if done != enqueued.Load() || r.completed.Load() != enqueued.Load() || live != 0 {
		t.Errorf("%d enqueued, %d completions applied, %d rows completed, %d live; want all equal and none live",
			enqueued.Load(), r.completed.Load(), done, live)
	}
	t.Logf("%d items enqueued, leased, renewed and completed across the migration", enqueued.Load())
	// The Store's reads over the contracted table, through the same pool.
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatalf("stats after 00013: %v", err)
	}
	if st.Total != 0 {
		t.Errorf("stats after the drain: %+v, want no live items", st)
	}
}

// contractRun is what the rounds of TestStoreAcrossTheWorkItemsContract
// share: the Store, the completions applied, the workflow IDs handed out.
type contractRun struct {
	s                    *queue.Store
	completed, workflows atomic.Int64
}

// leaseAndComplete leases up to a batch as owner, renews and completes each
// leased item, and counts the completions applied.
func (r *contractRun) leaseAndComplete(ctx context.Context, owner string) error {
	s := r.s
	wf := make([]string, queue.MaxLeaseBatch)
	for i := range wf {
		wf[i] = fmt.Sprintf("wf-%s-%d", owner, r.workflows.Add(1))
	}
	res, err := s.Lease(ctx, queue.LeaseParams{Max: queue.MaxLeaseBatch, OwnerID: owner, WorkflowIDs: wf})
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	for _, fe := range res.Leased {
		rn, err := s.Renew(ctx, queue.RenewParams{Execution: fe.Execution})
		if err != nil || rn.Outcome != queue.OutcomeApplied {
			return fmt.Errorf("renew %s: %+v, %v", fe.Entry.EntryID, rn, err)
		}
		f := fe.Execution
		if rn.Execution != nil {
			f = *rn.Execution
		}
		c, err := s.Complete(ctx, queue.CompleteParams{Execution: f, Status: queue.StatusCompleted})
		if err != nil || c.Outcome != queue.OutcomeApplied {
			return fmt.Errorf("complete %s: %+v, %v", fe.Entry.EntryID, c, err)
		}
		r.completed.Add(1)
	}
	return nil
}

func workItemColumns(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	return count(t, pool, `SELECT count(*) FROM information_schema.columns
		WHERE table_name = 'work_items' AND column_name = ANY($1)`, droppedColumns)
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AfterConnect = db.AfterConnect
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
