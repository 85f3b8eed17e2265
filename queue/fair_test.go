package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
)

// enqueueFor enqueues item n of GitHub installation inst, as the webhook
// intake does (FromGitHub, the installation in the subject's metadata).
func enqueueFor(t *testing.T, s *queue.Store, inst int64, n int) queue.EnqueueResult {
	t.Helper()
	d := dispatch("github_issue", fmt.Sprintf("inst%d/r#%d", inst, n))
	d.Subject.Metadata = json.RawMessage(fmt.Sprintf(`{"installation_id":%d,"repository":"inst%d/r","number":%d}`, inst, inst, n))
	return mustEnqueue(t, s, queue.EnqueueParams{Dispatch: d, FromGitHub: true})
}

// floodInstallation inserts n due items of installation inst straight in
// SQL, queued before anything enqueued after it.
func floodInstallation(t *testing.T, db dbq.DBTX, inst int64, n int) {
	t.Helper()
	_, err := db.Exec(context.Background(), `INSERT INTO work_items (id, status, is_v2, subject_id, canonical_id, subject_generation, dispatch, enqueued_at, source)
		SELECT gen_random_uuid(), 'pending', true, 'github_issue:flood' || $2::bigint || '/r#' || g, 'github_issue:flood' || $2::bigint || '/r#' || g, 1,
		       jsonb_build_object('subject', jsonb_build_object('kind', 'github_issue', 'id', 'flood' || $2::bigint || '/r#' || g,
		           'metadata', jsonb_build_object('installation_id', $2::bigint))), now(), 'github'
		FROM generate_series(1, $1::int) g`, n, inst)
	if err != nil {
		t.Fatal(err)
	}
}

// installationsOf lists the installation of each leased item, in order.
func installationsOf(t *testing.T, pool *pgxpool.Pool, leased []queue.FencedEntry) []int64 {
	t.Helper()
	out := make([]int64, len(leased))
	for i, fe := range leased {
		if err := pool.QueryRow(context.Background(), `SELECT installation_id FROM work_items WHERE id = $1`, fe.Entry.EntryID).Scan(&out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestLeaseTakesInstallationsInTurn(t *testing.T) {
	t.Parallel()
	s, pool, _ := newStore(t)
	// Installation 1 queued first and most, then 2, then /rpc items (installation 0).
	for n := range 6 {
		enqueueFor(t, s, 1, n)
	}
	for n := range 2 {
		enqueueFor(t, s, 2, n)
	}
	for n := range 2 {
		mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(n)})
	}
	// None served yet: they take turns by installation ID, one item each.
	got := installationsOf(t, pool, mustLease(t, s, "w", 5))
	if fmt.Sprint(got) != "[0 1 2 0 1]" {
		t.Fatalf("first lease took installations %v, want [0 1 2 0 1]", got)
	}
	// 0 has drained; 1 was served before 2 in that call, so 1 goes first.
	got = installationsOf(t, pool, mustLease(t, s, "w", 5))
	if fmt.Sprint(got) != "[1 2 1 1 1]" {
		t.Fatalf("second lease took installations %v, want [1 2 1 1 1]", got)
	}
	// New /rpc items: installation 0 was served least recently.
	for n := 2; n < 4; n++ {
		mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(n)})
	}
	got = installationsOf(t, pool, mustLease(t, s, "w", 2))
	if fmt.Sprint(got) != "[0 0]" {
		t.Fatalf("third lease took installations %v, want [0 0]", got)
	}
	if got := mustLease(t, s, "w", 5); len(got) != 0 {
		t.Fatalf("fourth lease took %d items, want none left", len(got))
	}
	// A lease that found nothing retired the drained installations.
	if n := count(t, pool, `SELECT count(*) FROM lease_installations WHERE NOT idle`); n != 0 {
		t.Fatalf("%d drained installations are not idle", n)
	}
}

func TestFloodDoesNotDelayAnotherInstallation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, _ := newStore(t)
	floodInstallation(t, pool, 1, 20_000)
	if _, err := pool.Exec(ctx, "ANALYZE work_items"); err != nil {
		t.Fatal(err)
	}
	// Installation 1 is being worked: it has been served.
	if got := installationsOf(t, pool, mustLease(t, s, "w", 5)); fmt.Sprint(got) != "[1 1 1 1 1]" {
		t.Fatalf("lease took %v", got)
	}
	b := enqueueFor(t, s, 2, 1)
	got := mustLease(t, s, "w", 1)
	if len(got) != 1 || got[0].Entry.EntryID != b.EntryID {
		t.Fatalf("the lease after installation 2's item was enqueued took %+v, want %s", got, b.EntryID)
	}
	// And again once 2 has drained and become idle: a new item of it is next.
	if got := installationsOf(t, pool, mustLease(t, s, "w", 5)); fmt.Sprint(got) != "[1 1 1 1 1]" {
		t.Fatalf("lease took %v", got)
	}
	b = enqueueFor(t, s, 2, 2)
	if got := mustLease(t, s, "w", 2); len(got) != 2 || got[0].Entry.EntryID != b.EntryID {
		t.Fatalf("lease took %+v, want %s first", got, b.EntryID)
	}
}

func TestPausedInstallationWaitsForItsDeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, clk := newStore(t)
	for n := range 3 {
		enqueueFor(t, s, 1, n)
	}
	if err := s.PauseInstallation(ctx, 1, clk.Now().Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// An earlier deadline does not shorten the pause.
	if err := s.PauseInstallation(ctx, 1, clk.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for n := range 3 {
		enqueueFor(t, s, 2, n)
	}
	if got := installationsOf(t, pool, mustLease(t, s, "w", 5)); fmt.Sprint(got) != "[2 2 2]" {
		t.Fatalf("lease while 1 is paused took %v, want only 2's items", got)
	}
	clk.Advance(9 * time.Minute)
	if got := mustLease(t, s, "w", 5); len(got) != 0 {
		t.Fatalf("lease before the deadline took %d items", len(got))
	}
	clk.Advance(time.Minute)
	if got := installationsOf(t, pool, mustLease(t, s, "w", 5)); fmt.Sprint(got) != "[1 1 1]" {
		t.Fatalf("lease at the deadline took %v, want 1's items", got)
	}
}

func TestCapHoldsUnderConcurrentLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const limit = 3
	s, pool, _ := newStore(t)
	for inst := int64(1); inst <= 4; inst++ {
		for n := range 20 {
			enqueueFor(t, s, inst, n)
		}
	}
	for n := range 10 {
		mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(n)})
	}
	// Three Stores over three pools, as three serve instances, 12 leasers.
	stores := make([]*queue.Store, 3)
	for i := range stores {
		p, err := pgxpool.NewWithConfig(ctx, pool.Config())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		stores[i] = queue.NewStore(p, queue.Config{LeaseTTL: ttl, MaxAssignedPerInstallation: limit})
	}
	check := func(round int) {
		rows, err := pool.Query(ctx, `SELECT installation_id, count(*) FROM work_items WHERE status = 'assigned' GROUP BY 1 ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var inst, n int64
			if err := rows.Scan(&inst, &n); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%d:%d", inst, n))
		}
		// Every GitHub installation exactly at its cap; /rpc items uncapped.
		if want := fmt.Sprintf("0:%d 1:3 2:3 3:3 4:3", 10*(round+1)); strings.Join(got, " ") != want {
			t.Fatalf("round %d: assigned by installation %v, want %s", round, got, want)
		}
	}
	var leased [3][4][]queue.FencedEntry // by store, by leaser
	for round := range 2 {
		// Each leaser keeps leasing until a lease comes back empty twice.
		run(12, func(i int) {
			st := stores[i%3]
			for empty := 0; empty < 2; {
				got := mustLease(t, st, fmt.Sprintf("w%d", i), 5)
				if len(got) == 0 {
					empty++
				}
				leased[i%3][i/3] = append(leased[i%3][i/3], got...)
			}
		})
		check(round)
		// Complete two items of each installation: two more of each may go.
		done := map[int64]int{}
		for i := range leased {
			for j := range leased[i] {
				var keep []queue.FencedEntry
				for _, fe := range leased[i][j] {
					inst := installationsOf(t, pool, []queue.FencedEntry{fe})[0]
					if inst != 0 && done[inst] < 2 {
						done[inst]++
						if r, err := stores[0].Complete(ctx, queue.CompleteParams{Execution: fe.Execution, Status: queue.StatusCompleted}); err != nil || r.Outcome != queue.OutcomeApplied {
							t.Fatalf("complete: %+v %v", r, err)
						}
						continue
					}
					keep = append(keep, fe)
				}
				leased[i][j] = keep
			}
		}
		if round == 0 {
			for n := 10; n < 20; n++ {
				mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(n)})
			}
			// Only the ten new /rpc items and two of each installation remain to lease.
		}
	}
}

// TestFairLeasePlanIsBounded: the fair scan walks the installations' turn
// index and each installation's pending index under a Limit, with and
// without statistics, and reads no more of the table than that.
func TestFairLeasePlanIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool, _ := newStore(t)
	floodInstallation(t, pool, 1, 20_000)
	floodInstallation(t, pool, 2, 100)
	for _, analysed := range []bool{false, true} {
		if analysed {
			if _, err := pool.Exec(ctx, "ANALYZE work_items"); err != nil {
				t.Fatal(err)
			}
		}
		// The plan of the function's statement, with its own settings.
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT set_config(split_part(c, '=', 1), split_part(c, '=', 2), true)
			FROM pg_proc, unnest(proconfig) AS c WHERE proname = 'work_item_lease_fair'`); err != nil {
			t.Fatal(err)
		}
		var body string
		if err := tx.QueryRow(ctx, `SELECT prosrc FROM pg_proc WHERE proname = 'work_item_lease_fair'`).Scan(&body); err != nil {
			t.Fatal(err)
		}
		// The statement RETURN QUERY runs, prepared with the function's
		// parameters as its own, so EXPLAIN EXECUTE shows the plan the
		// function keeps (plan_cache_mode, migration 00025), executed with
		// the parameters the lease passes.
		_, body, _ = strings.Cut(body, "RETURN QUERY")
		body, _, _ = strings.Cut(body, ";")
		r := strings.NewReplacer("now_at", "$1", "max_items", "$2", "scan", "$3", "cap", "$4", "taken", "$5")
		if _, err := tx.Exec(ctx, "PREPARE fair_scan (timestamptz, integer, integer, integer, uuid[]) AS "+r.Replace(body)); err != nil {
			t.Fatal(err)
		}
		p := explain(t, tx, "EXECUTE fair_scan (now(), 5, 50, 0, '{}')")
		if _, err := tx.Exec(ctx, "DEALLOCATE fair_scan"); err != nil {
			t.Fatal(err)
		}
		_ = tx.Rollback(ctx)
		for _, want := range []string{"Index Scan using lease_installations_turn", "Index Scan using work_items_pending_installation", "LockRows"} {
			if !strings.Contains(p, want) {
				t.Errorf("analysed=%v: fair lease plan lacks %q:\n%s", analysed, want, p)
			}
		}
		if strings.Contains(p, "Seq Scan on work_items") || strings.Contains(p, "Bitmap") {
			t.Errorf("analysed=%v: fair lease plan scans work_items beyond its indexes:\n%s", analysed, p)
		}
	}
}

// TestFloodDoesNotDelayAnotherInstallationUnderConcurrentLeases: four
// leasers on separate pools take installation 1's flood one item at a
// time; installation 2's item, enqueued meanwhile, is leased by a call
// that was in flight when the enqueue returned or by some leaser's first
// call after it: never later.
func TestFloodDoesNotDelayAnotherInstallationUnderConcurrentLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, _ := newStore(t)
	floodInstallation(t, pool, 1, 5_000)
	type call struct {
		start, end time.Time
		gotB       bool
	}
	const leasers = 4
	var calls [leasers][]call
	var b atomic.Value // the entry ID of installation 2's item, once enqueued
	var enqueued atomic.Int64
	stop := make(chan struct{})
	run(leasers+1, func(i int) {
		if i == leasers { // the enqueuer
			time.Sleep(200 * time.Millisecond)
			res := enqueueFor(t, s, 2, 1)
			b.Store(res.EntryID)
			enqueued.Store(time.Now().UnixNano())
			time.Sleep(500 * time.Millisecond)
			close(stop)
			return
		}
		p, err := pgxpool.NewWithConfig(ctx, pool.Config())
		if err != nil {
			t.Error(err)
			return
		}
		defer p.Close()
		st := queue.NewStore(p, queue.Config{LeaseTTL: ttl})
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			c := call{start: time.Now()}
			got := mustLease(t, st, fmt.Sprintf("w%d-%d", i, n), 1)
			c.end = time.Now()
			if want, ok := b.Load().(string); ok && len(got) == 1 && got[0].Entry.EntryID == want {
				c.gotB = true
			}
			calls[i] = append(calls[i], c)
		}
	})
	t0 := time.Unix(0, enqueued.Load())
	leasedBy := 0
	for i := range calls {
		first := true
		for _, c := range calls[i] {
			onTime := c.start.Before(t0) && c.end.After(t0) // in flight at t0
			if !c.start.Before(t0) {
				onTime = first
				first = false
			}
			if c.gotB {
				leasedBy++
				if !onTime {
					t.Errorf("leaser %d took installation 2's item in a call started %v after the enqueue, after its first", i, c.start.Sub(t0))
				}
			}
		}
	}
	if leasedBy != 1 {
		t.Fatalf("installation 2's item was leased %d times, want once", leasedBy)
	}
}

// TestEnqueuesRacingDrainsStrandNothing races enqueuers (groups of
// deliveries committed together, as the intake sends them, and single
// enqueues) against leasers that drain installations and mark them idle: an
// item committed while its installation is being marked idle must still be
// leased. Every item enqueued is leased exactly once.
func TestEnqueuesRacingDrainsStrandNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, _ := newStore(t)
	const enqueuers, leasers, rounds, installations = 3, 3, 40, 3
	params := func(i, r, k int) queue.EnqueueParams {
		inst := 1 + (r+k)%installations
		d := dispatch("github_issue", fmt.Sprintf("inst%d/r#%d-%d-%d", inst, i, r, k))
		d.Subject.Metadata = json.RawMessage(fmt.Sprintf(`{"installation_id":%d,"repository":"inst%d/r"}`, inst, inst))
		return queue.EnqueueParams{Dispatch: d, FromGitHub: true, IdempotencyKey: fmt.Sprintf("d-%d-%d-%d", i, r, k),
			Reservation: &queue.Reservation{Repository: fmt.Sprintf("inst%d/r", inst), BaseRef: "refs/heads/main",
				HeadRef: fmt.Sprintf("refs/heads/gitlease/%d-%d-%d", i, r, k)}}
	}
	var enqueued, leased atomic.Int64
	var done atomic.Int32
	drain := func(st *queue.Store, owner string) int {
		got := mustLease(t, st, owner, 5)
		for _, fe := range got {
			if r, err := st.Complete(ctx, queue.CompleteParams{Execution: fe.Execution, Status: queue.StatusCompleted}); err != nil || r.Outcome != queue.OutcomeApplied {
				t.Errorf("complete: %+v %v", r, err)
			}
		}
		leased.Add(int64(len(got)))
		return len(got)
	}
	run(enqueuers+leasers, func(i int) {
		if i >= enqueuers {
			for n := 0; done.Load() < enqueuers; n++ {
				drain(s, fmt.Sprintf("w%d-%d", i, n))
			}
			return
		}
		defer done.Add(1)
		for r := range rounds {
			if r%2 == 0 {
				enqueued.Add(1)
				if _, err := s.Enqueue(ctx, params(i, r, 0)); err != nil {
					t.Error(err)
				}
				continue
			}
			group := []queue.EnqueueParams{params(i, r, 0), params(i, r, 1), params(i, r, 2)}
			err := s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
				answers, err := s.EnqueueGroupTx(ctx, tx, group)
				for _, a := range answers {
					if a.Err != nil {
						t.Error(a.Err)
					}
				}
				return err
			})
			if err != nil {
				t.Error(err)
			}
			enqueued.Add(int64(len(group)))
		}
	})
	for n := 0; drain(s, fmt.Sprintf("last-%d", n)) > 0; n++ {
	}
	if got, want := leased.Load(), enqueued.Load(); got != want {
		t.Fatalf("leased %d items, enqueued %d", got, want)
	}
	if n := count(t, pool, `SELECT count(*) FROM work_items WHERE status <> 'completed'`); n != 0 {
		t.Fatalf("%d items not completed", n)
	}
}
