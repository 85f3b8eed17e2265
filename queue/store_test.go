package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
)

// fakeClock is a queue clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const ttl = 30 * time.Minute

func newStore(t *testing.T) (*queue.Store, *pgxpool.Pool, *fakeClock) {
	t.Helper()
	pool := dbtest.New(t)
	clk := newClock()
	return queue.NewStore(pool, queue.Config{LeaseTTL: ttl, Now: clk.Now}), pool, clk
}

func dispatch(kind, id string) queue.SubjectDispatch {
	return queue.SubjectDispatch{
		Subject:     &queue.SubjectRef{Kind: kind, ID: id, Title: "t"},
		WorkflowRef: "coding", TriggerSource: "test",
		RequestedAt: queue.Timestamp{Time: time.Date(2026, 10, 1, 11, 0, 0, 0, time.UTC)},
	}
}

func issue(n int) queue.SubjectDispatch {
	return dispatch("github_issue", fmt.Sprintf("1296269#%d", n))
}

func reservation(head string) *queue.Reservation {
	return &queue.Reservation{Repository: "acme/widgets", BaseRef: "refs/heads/main", HeadRef: head}
}

func mustEnqueue(t *testing.T, s *queue.Store, p queue.EnqueueParams) queue.EnqueueResult {
	t.Helper()
	res, err := s.Enqueue(context.Background(), p)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return res
}

func mustLease(t *testing.T, s *queue.Store, owner string, max int) []queue.FencedEntry {
	t.Helper()
	wf := make([]string, max)
	for i := range wf {
		wf[i] = fmt.Sprintf("wf-%s-%d-%d", owner, time.Now().UnixNano(), i)
	}
	res, err := s.Lease(context.Background(), queue.LeaseParams{Max: max, OwnerID: owner, WorkflowIDs: wf})
	if err != nil {
		t.Fatalf("lease: %v", err)
	}
	return res.Leased
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

// run starts n goroutines at once and waits for them.
func run(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

func TestEnqueueSameKeyConcurrently(t *testing.T) {
	t.Parallel()
	s, pool, _ := newStore(t)
	var created, replays atomic.Int32
	ids := sync.Map{}
	run(50, func(int) {
		res, err := s.Enqueue(context.Background(), queue.EnqueueParams{Dispatch: issue(42), IdempotencyKey: "delivery-1", Reservation: reservation("refs/heads/gitlease/issue-42")})
		if err != nil {
			t.Errorf("enqueue: %v", err)
			return
		}
		ids.Store(res.EntryID, true)
		if res.Enqueued {
			created.Add(1)
		} else {
			replays.Add(1)
		}
	})
	if created.Load() != 1 || replays.Load() != 49 {
		t.Fatalf("created %d, replays %d; want 1 and 49", created.Load(), replays.Load())
	}
	n := 0
	ids.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Fatalf("answers named %d entries, want 1", n)
	}
	if rows := count(t, pool, "SELECT count(*) FROM work_items"); rows != 1 {
		t.Fatalf("%d rows, want 1", rows)
	}
}

func TestEnqueueSameSubjectConcurrently(t *testing.T) {
	t.Parallel()
	s, pool, _ := newStore(t)
	var created atomic.Int32
	var collisions atomic.Int32
	var winner atomic.Value
	run(20, func(i int) {
		res, err := s.Enqueue(context.Background(), queue.EnqueueParams{Dispatch: issue(7), IdempotencyKey: fmt.Sprintf("k-%d", i)})
		var sc *queue.SubjectCollisionError
		switch {
		case err == nil && res.Enqueued:
			created.Add(1)
			winner.Store(res.EntryID)
		case errors.As(err, &sc):
			collisions.Add(1)
			if sc.QualifiedID != "github_issue:1296269#7" || sc.Generation == nil || *sc.Generation != 1 {
				t.Errorf("collision names %+v, want generation 1 of github_issue:1296269#7", sc)
			}
		default:
			t.Errorf("enqueue %d: %+v, %v", i, res, err)
		}
	})
	if created.Load() != 1 || collisions.Load() != 19 {
		t.Fatalf("created %d, collisions %d; want 1 and 19", created.Load(), collisions.Load())
	}
	// A rejected enqueue binds no key and takes no generation.
	if n := count(t, pool, "SELECT count(*) FROM work_items"); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
	if n := count(t, pool, "SELECT last_generation FROM subject_generations"); n != 1 {
		t.Fatalf("last generation %d, want 1", n)
	}
	leased := mustLease(t, s, "w", 5)
	if len(leased) != 1 || leased[0].Entry.EntryID != winner.Load().(string) {
		t.Fatalf("lease returned %d items, want exactly the created one", len(leased))
	}
}

func TestEnqueueSameReservationConcurrently(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	var created, collisions atomic.Int32
	run(20, func(i int) {
		// The repository is compared ignoring case and surrounding space.
		r := &queue.Reservation{Repository: []string{"acme/widgets", "ACME/Widgets", " acme/widgets "}[i%3], BaseRef: "refs/heads/main", HeadRef: "refs/heads/feature"}
		_, err := s.Enqueue(context.Background(), queue.EnqueueParams{Dispatch: dispatch("github_pull_request", fmt.Sprintf("1296269#%d", 100+i)), Reservation: r})
		var rc *queue.ReservationCollisionError
		switch {
		case err == nil:
			created.Add(1)
		case errors.As(err, &rc):
			collisions.Add(1)
			if rc.Holder.HeadRef != "refs/heads/feature" || rc.Generation != 1 || rc.Status != queue.StatusPending {
				t.Errorf("collision names %+v", rc)
			}
		default:
			t.Errorf("enqueue %d: %v", i, err)
		}
	})
	if created.Load() != 1 || collisions.Load() != 19 {
		t.Fatalf("created %d, collisions %d; want 1 and 19", created.Load(), collisions.Load())
	}
}

func TestConcurrentLeasesNeverShareAnItem(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	for i := 0; i < 5; i++ {
		mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(i)})
	}
	var mu sync.Mutex
	got := map[string]int{}
	run(5, func(i int) {
		for _, fe := range mustLease(t, s, fmt.Sprintf("owner-%d", i), 1) {
			mu.Lock()
			got[fe.Entry.EntryID]++
			mu.Unlock()
		}
	})
	if len(got) != 5 {
		t.Fatalf("5 leasers got %d distinct items, want 5: %v", len(got), got)
	}
	for id, n := range got {
		if n != 1 {
			t.Fatalf("item %s leased %d times", id, n)
		}
	}
}

func TestDrainLeasesEveryItemExactlyOnce(t *testing.T) {
	t.Parallel()
	s, pool, _ := newStore(t)
	const items, leasers = 200, 10
	for i := 0; i < items; i++ {
		mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(i), Reservation: reservation(fmt.Sprintf("refs/heads/gitlease/issue-%d", i))})
	}
	var mu sync.Mutex
	seen := map[string]int{}
	run(leasers, func(w int) {
		for {
			leased := mustLease(t, s, fmt.Sprintf("owner-%d", w), queue.MaxLeaseBatch)
			if len(leased) == 0 {
				return
			}
			for _, fe := range leased {
				mu.Lock()
				seen[fe.Entry.EntryID]++
				mu.Unlock()
				res, err := s.Complete(context.Background(), queue.CompleteParams{Execution: fe.Execution, Status: queue.StatusCompleted})
				if err != nil || res.Outcome != queue.OutcomeApplied {
					t.Errorf("complete: %+v, %v", res, err)
				}
			}
		}
	})
	if len(seen) != items {
		t.Fatalf("leased %d distinct items, want %d", len(seen), items)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("item %s leased %d times", id, n)
		}
	}
	if n := count(t, pool, "SELECT count(*) FROM work_items WHERE status = 'completed'"); n != items {
		t.Fatalf("%d completed, want %d", n, items)
	}
}

func TestFencedMutationsRejectStaleFences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type mutate func(s *queue.Store, f queue.Fence) (queue.MutationResult, error)
	ops := map[string]mutate{
		"renew": func(s *queue.Store, f queue.Fence) (queue.MutationResult, error) {
			return s.Renew(ctx, queue.RenewParams{Execution: f})
		},
		"complete": func(s *queue.Store, f queue.Fence) (queue.MutationResult, error) {
			return s.Complete(ctx, queue.CompleteParams{Execution: f, Status: queue.StatusCompleted})
		},
		"release_pending": func(s *queue.Store, f queue.Fence) (queue.MutationResult, error) {
			return s.ReleasePending(ctx, queue.ReleasePendingParams{Execution: f, Reason: "test"})
		},
	}
	tamper := map[string]func(f *queue.Fence){
		"wrong owner":              func(f *queue.Fence) { f.QueueLease.OwnerID = "intruder" },
		"wrong lease generation":   func(f *queue.Fence) { f.QueueLease.Generation++ },
		"wrong workflow":           func(f *queue.Fence) { f.WorkflowID = "wf-other" },
		"wrong workflow gen":       func(f *queue.Fence) { f.WorkflowGeneration++ },
		"wrong subject generation": func(f *queue.Fence) { f.Subject.Generation++ },
		"wrong head ref":           func(f *queue.Fence) { f.Repository.HeadRef = "refs/heads/other" },
		"missing repository":       func(f *queue.Fence) { f.Repository = nil },
	}
	for opName, op := range ops {
		for name, change := range tamper {
			t.Run(opName+"/"+name, func(t *testing.T) {
				t.Parallel()
				s, pool, _ := newStore(t)
				mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(1), Reservation: reservation("refs/heads/gitlease/issue-1")})
				fe := mustLease(t, s, "owner-a", 1)[0]
				before := snapshot(t, pool)
				f := cloneFence(fe.Execution)
				change(&f)
				res, err := op(s, f)
				if err != nil || res.Outcome != queue.OutcomeStaleFence || res.Execution != nil {
					t.Fatalf("got %+v, %v; want stale_fence without a fence", res, err)
				}
				if after := snapshot(t, pool); after != before {
					t.Fatalf("a stale fence changed the item:\n before %s\n after  %s", before, after)
				}
			})
		}
	}
}

func cloneFence(f queue.Fence) queue.Fence {
	c := f
	s, l := *f.Subject, *f.QueueLease
	c.Subject, c.QueueLease = &s, &l
	if f.Repository != nil {
		r := *f.Repository
		c.Repository = &r
	}
	return c
}

func snapshot(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), "SELECT string_agg(w::text, ';' ORDER BY id) FROM work_items w").Scan(&s); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return s
}

func TestRecoveryFencesOutTheOldOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, clk := newStore(t)
	mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(1)})
	old := mustLease(t, s, "owner-a", 1)[0].Execution

	res, err := s.Recover(ctx, queue.RecoverParams{Execution: old, NewOwnerID: "owner-b"})
	if err != nil || res.Outcome != queue.OutcomeLeaseStillLive {
		t.Fatalf("recover of a live lease: %+v, %v; want lease_still_live", res, err)
	}
	if res, _ := s.Renew(ctx, queue.RenewParams{Execution: old}); res.Outcome != queue.OutcomeApplied {
		t.Fatalf("renew of a live lease: %+v", res)
	}
	clk.Advance(ttl + time.Second)
	if res, _ := s.Renew(ctx, queue.RenewParams{Execution: old}); res.Outcome != queue.OutcomeStaleFence || res.Reason != "queue lease has expired and requires recovery" {
		t.Fatalf("renew of an expired lease: %+v", res)
	}

	// Two recoverers race: exactly one wins.
	var applied, stale atomic.Int32
	var newFence atomic.Value
	run(2, func(i int) {
		res, err := s.Recover(ctx, queue.RecoverParams{Execution: old, NewOwnerID: fmt.Sprintf("owner-%c", 'b'+i)})
		switch {
		case err != nil:
			t.Errorf("recover: %v", err)
		case res.Outcome == queue.OutcomeApplied:
			applied.Add(1)
			newFence.Store(*res.Execution)
		case res.Outcome == queue.OutcomeStaleFence:
			stale.Add(1)
		}
	})
	if applied.Load() != 1 || stale.Load() != 1 {
		t.Fatalf("applied %d, stale %d; want 1 and 1", applied.Load(), stale.Load())
	}
	nf := newFence.Load().(queue.Fence)
	if nf.QueueLease.Generation != old.QueueLease.Generation+1 || nf.WorkflowID != old.WorkflowID ||
		nf.WorkflowGeneration != old.WorkflowGeneration || *nf.Subject != *old.Subject {
		t.Fatalf("recovered fence %+v: want lease generation +1 and the same workflow and subject", nf)
	}
	for name, op := range map[string]func() (queue.MutationResult, error){
		"renew": func() (queue.MutationResult, error) { return s.Renew(ctx, queue.RenewParams{Execution: old}) },
		"complete": func() (queue.MutationResult, error) {
			return s.Complete(ctx, queue.CompleteParams{Execution: old, Status: "completed"})
		},
		"release": func() (queue.MutationResult, error) {
			return s.ReleasePending(ctx, queue.ReleasePendingParams{Execution: old, Reason: "late"})
		},
	} {
		if res, err := op(); err != nil || res.Outcome != queue.OutcomeStaleFence {
			t.Errorf("%s with the old owner's fence: %+v, %v; want stale_fence", name, res, err)
		}
	}
	if res, _ := s.Complete(ctx, queue.CompleteParams{Execution: nf, Status: queue.StatusFailed}); res.Outcome != queue.OutcomeApplied {
		t.Fatalf("complete with the new fence: %+v", res)
	}
	res, err = s.Complete(ctx, queue.CompleteParams{Execution: nf, Status: queue.StatusCompleted})
	if err != nil || res.Outcome != queue.OutcomeAlreadyApplied || res.Execution == nil {
		t.Fatalf("second completion: %+v, %v; want already_applied with the fence", res, err)
	}
	it, err := s.Get(ctx, nf.QueueLease.EntryID)
	if err != nil || it.Status() != queue.StatusFailed {
		t.Fatalf("item status %q (%v); the first outcome (failed) must stand", it.Status(), err)
	}
}

func TestGenerationsIncreaseAndNeverRepeat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, _ := newStore(t)
	for want := uint64(1); want <= 5; want++ {
		res := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(9)})
		if res.Subject.Generation != want {
			t.Fatalf("generation %d, want %d", res.Subject.Generation, want)
		}
		fe := mustLease(t, s, "w", 1)[0]
		if r, err := s.Complete(ctx, queue.CompleteParams{Execution: fe.Execution, Status: queue.StatusCompleted}); err != nil || r.Outcome != queue.OutcomeApplied {
			t.Fatalf("complete: %+v %v", r, err)
		}
	}
	// Concurrent enqueue/finish cycles on one subject: each generation once.
	run(8, func(i int) {
		for j := 0; j < 10; j++ {
			res, err := s.Enqueue(ctx, queue.EnqueueParams{Dispatch: issue(9)})
			var sc *queue.SubjectCollisionError
			if errors.As(err, &sc) {
				continue
			}
			if err != nil {
				t.Errorf("enqueue: %v", err)
				return
			}
			if _, err := s.Drop(ctx, res.EntryID); err != nil {
				t.Errorf("drop: %v", err)
			}
		}
	})
	rows := count(t, pool, "SELECT count(*) FROM work_items WHERE canonical_id = 'github_issue:1296269#9'")
	distinct := count(t, pool, "SELECT count(DISTINCT subject_generation) FROM work_items WHERE canonical_id = 'github_issue:1296269#9'")
	maxGen := count(t, pool, "SELECT max(subject_generation) FROM work_items WHERE canonical_id = 'github_issue:1296269#9'")
	if rows != distinct || maxGen != rows {
		t.Fatalf("%d items, %d distinct generations, highest %d: generations must be 1..n without gaps or repeats", rows, distinct, maxGen)
	}
}

func TestDeferredAndExpiringItems(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, clk := newStore(t)
	secs := uint64(60)
	later := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(1), RunAt: "2026-10-01T13:00:00+01:00"}) // 12:00Z: due now
	deferred := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(2), RunAt: "2026-10-01T12:30:00Z", ExpireAfterSecs: &secs})
	st, _ := s.Stats(ctx)
	if st.Pending != 2 || st.Deferred != 1 {
		t.Fatalf("stats %+v, want 2 pending, 1 deferred", st)
	}
	leased := mustLease(t, s, "w", 5)
	if len(leased) != 1 || leased[0].Entry.EntryID != later.EntryID {
		t.Fatalf("leased %d, want only the due item", len(leased))
	}
	if next, err := s.NextDeadline(ctx); err != nil || next == nil || !next.Equal(time.Date(2026, 10, 1, 12, 30, 0, 0, time.UTC)) {
		t.Fatalf("next deadline %v, %v", next, err)
	}
	clk.Advance(32 * time.Minute) // past run_at + 60 s
	if got := mustLease(t, s, "w", 5); len(got) != 0 {
		t.Fatalf("an expired item was leased")
	}
	it, _ := s.Get(ctx, deferred.EntryID)
	if it.Status() != queue.StatusDropped {
		t.Fatalf("expired item is %q, want dropped", it.Status())
	}
}

func TestLeaseReportsExcludeBlocks(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	a := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(1)})
	b := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(2), Reservation: reservation("refs/heads/x")})
	c := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(3)})
	exclude := []queue.Fence{
		{Schema: queue.FenceSchema, Version: 1, WorkflowID: "remote-1", WorkflowGeneration: 1, Subject: &queue.SubjectGeneration{QualifiedID: a.Subject.QualifiedID, Generation: 1}},
		{Schema: queue.FenceSchema, Version: 1, WorkflowID: "remote-2", WorkflowGeneration: 1, Repository: &queue.Reservation{Repository: "ACME/widgets", BaseRef: "refs/heads/dev", HeadRef: "refs/heads/x"}},
	}
	res, err := s.Lease(context.Background(), queue.LeaseParams{Max: 1, OwnerID: "w", WorkflowIDs: []string{"wf-1"}, Exclude: exclude})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Leased) != 1 || res.Leased[0].Entry.EntryID != c.EntryID || res.Leased[0].Execution.WorkflowID != "wf-1" {
		t.Fatalf("leased %+v, want only %s with wf-1", res.Leased, c.EntryID)
	}
	want := []struct{ id, reason string }{{a.EntryID, queue.BlockSubjectGenerationActive}, {b.EntryID, queue.BlockRepositoryRefCollision}}
	if len(res.Blocked) != len(want) {
		t.Fatalf("blocked %+v", res.Blocked)
	}
	for i, w := range want {
		if res.Blocked[i].EntryID != w.id || res.Blocked[i].Reason != w.reason || res.Blocked[i].ConflictsWith == nil {
			t.Errorf("blocked[%d] = %+v, want %s %s", i, res.Blocked[i], w.id, w.reason)
		}
	}
}

// explain returns the plan of query on db.
func explain(t *testing.T, db dbq.DBTX, query string) string {
	t.Helper()
	rows, err := db.Query(context.Background(), "EXPLAIN "+query)
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan.String()
}

func TestClosingASubjectCancelsItsItems(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, _ := newStore(t)
	running := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(1)})
	fe := mustLease(t, s, "w", 1)[0]
	held := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(2)})
	if _, err := s.Hold(ctx, held.EntryID); err != nil {
		t.Fatal(err)
	}
	for _, qid := range []string{running.Subject.QualifiedID, held.Subject.QualifiedID} {
		err := s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			_, err := s.CancelSubjectTx(ctx, tx, qid, "")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if it, _ := s.Get(ctx, held.EntryID); it.Status() != queue.StatusCancelled {
		t.Fatalf("held item is %q, want cancelled", it.Status())
	}
	if it, _ := s.Get(ctx, running.EntryID); it.Status() != queue.StatusAssigned {
		t.Fatalf("assigned item is %q before its renew, want still assigned", it.Status())
	}
	res, err := s.Renew(ctx, queue.RenewParams{Execution: fe.Execution})
	if err != nil || res.Outcome != queue.OutcomeNotAssigned || res.Reason != queue.ReasonSubjectClosed {
		t.Fatalf("renew after close: %+v, %v; want not_assigned, subject closed", res, err)
	}
	if it, _ := s.Get(ctx, running.EntryID); it.Status() != queue.StatusCancelled {
		t.Fatalf("assigned item is %q after its renew, want cancelled", it.Status())
	}
	// The subject is free again: a reopen creates the next generation.
	if res := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(1)}); res.Subject.Generation != 2 {
		t.Fatalf("reopened generation %d, want 2", res.Subject.Generation)
	}
}

func TestEnqueueSweepsAnExpiredBlocker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, clk := newStore(t)
	secs := uint64(10)
	old := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(1), RunAt: "2026-10-01T12:00:00Z", ExpireAfterSecs: &secs,
		Reservation: reservation("refs/heads/gitlease/issue-1")})
	clk.Advance(time.Minute)
	// The same subject and branch again: the expired item is swept in the
	// same call, so it blocks nothing.
	res := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(1), Reservation: reservation("refs/heads/gitlease/issue-1")})
	if res.Subject.Generation != 2 {
		t.Fatalf("generation %d, want 2", res.Subject.Generation)
	}
	if it, _ := s.Get(ctx, old.EntryID); it.Status() != queue.StatusDropped {
		t.Fatalf("expired item is %q, want dropped", it.Status())
	}
	if n := count(t, pool, "SELECT count(*) FROM work_item_audit WHERE method = 'expiry-sweep'"); n != 1 {
		t.Fatalf("%d sweep audit records, want 1", n)
	}
}

// TestLegacyItemBlocksANewGeneration: a pending legacy item of the subject
// blocks a v2 enqueue (queue v2 §3.3 step 6), on every path, and takes no
// generation.
func TestLegacyItemBlocksANewGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, _ := newStore(t)
	legacy, err := s.LegacyEnqueue(ctx, issue(5), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Enqueue(ctx, queue.EnqueueParams{Dispatch: issue(5)})
	var sc *queue.SubjectCollisionError
	if !errors.As(err, &sc) || sc.EntryID != legacy.EntryID || sc.Generation != nil || sc.Status != queue.StatusPending {
		t.Fatalf("enqueue over a legacy item: %v, want a subject collision naming it without a generation", err)
	}
	err = s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := s.EnqueueTxOptimistic(ctx, tx, queue.EnqueueParams{Dispatch: issue(5)})
		return err
	})
	if !queue.IsRetryable(err) {
		t.Fatalf("optimistic enqueue over a legacy item: %v, want a retryable error", err)
	}
	if n := count(t, pool, "SELECT count(*) FROM subject_generations"); n != 0 {
		t.Fatalf("%d generations allocated, want 0", n)
	}
}

// TestOptimisticInsertFindsConflictsWithoutAnError: the optimistic insert
// answers a bound key, a live subject and a held reservation with a
// retryable error but no database error: its transaction stays usable, no
// generation is taken, and the statement stays prepared (pgx drops one
// whose execution failed, and re-plans it five times per connection).
func TestOptimisticInsertFindsConflictsWithoutAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, _ := newStore(t)
	held := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(1), IdempotencyKey: "delivery-1", Reservation: reservation("refs/heads/gitlease/issue-1")})
	for _, tc := range []struct {
		name string
		p    queue.EnqueueParams
	}{
		{"bound key", queue.EnqueueParams{Dispatch: issue(1), IdempotencyKey: "delivery-1", Reservation: reservation("refs/heads/gitlease/issue-1")}},
		{"live subject", queue.EnqueueParams{Dispatch: issue(1), IdempotencyKey: "delivery-2"}},
		{"held reservation", queue.EnqueueParams{Dispatch: issue(2), IdempotencyKey: "delivery-3", Reservation: reservation("refs/heads/gitlease/issue-1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
				_, err := s.EnqueueTxOptimistic(ctx, tx, tc.p)
				if !queue.IsRetryable(err) {
					t.Errorf("optimistic enqueue: %v, want a retryable error", err)
				}
				var pgErr *pgconn.PgError
				if errors.As(err, &pgErr) {
					t.Errorf("optimistic enqueue: database error %v, want none", pgErr)
				}
				// The transaction was not aborted.
				var one int
				return tx.QueryRow(ctx, "SELECT 1").Scan(&one)
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	if n := count(t, pool, "SELECT last_generation FROM subject_generations WHERE qualified_id = $1", held.Subject.QualifiedID); n != 1 {
		t.Fatalf("subject's last generation %d, want 1", n)
	}
	if n := count(t, pool, "SELECT count(*) FROM subject_generations"); n != 1 {
		t.Fatalf("%d subjects with generations, want 1", n)
	}
}

// A pull request's dispatch, compressed, stays in its row: no TOAST rows
// to write at the enqueue or to read back at the lease (migration 00012).
// One too large for a row is still stored, out of line.
func TestLargeDispatchStaysInTheRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, _ := newStore(t)
	for i, tc := range []struct {
		size        int
		outOfLine   bool
		maxRowBytes int
	}{
		{size: 12_000, maxRowBytes: 8160},
		{size: 120_000, outOfLine: true},
	} {
		d := issue(i)
		d.Subject.Description = prose(tc.size)
		res := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: d})
		leased := mustLease(t, s, "w", 1)
		var got queue.SubjectDispatch
		if len(leased) != 1 {
			t.Fatalf("%d bytes: leased %d items, want 1", tc.size, len(leased))
		}
		if err := json.Unmarshal(leased[0].Entry.SubjectDispatch, &got); err != nil || got.Subject.Description != d.Subject.Description {
			t.Fatalf("%d bytes: the leased dispatch is not the one enqueued (%v)", tc.size, err)
		}
		var row, toast int
		if err := pool.QueryRow(ctx, `SELECT pg_column_size(w.*), pg_relation_size(c.reltoastrelid)
			FROM work_items w, pg_class c WHERE w.id = $1 AND c.relname = 'work_items'`, res.EntryID).Scan(&row, &toast); err != nil {
			t.Fatal(err)
		}
		if tc.outOfLine != (toast > 0) || (tc.maxRowBytes > 0 && row > tc.maxRowBytes) {
			t.Errorf("%d bytes: row %d bytes, TOAST table %d bytes; want out of line %v", tc.size, row, toast, tc.outOfLine)
		}
	}
}
