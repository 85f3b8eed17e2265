package worker

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gitlease/gitlease/queue"
)

func leaseAs(t *testing.T, store *queue.Store, owner string) queue.FencedEntry {
	t.Helper()
	res, err := store.Lease(context.Background(), queue.LeaseParams{Max: 1, OwnerID: owner, WorkflowIDs: []string{uuid.NewString()}})
	if err != nil || len(res.Leased) != 1 {
		t.Fatalf("lease as %s: %d leased, %v", owner, len(res.Leased), err)
	}
	return res.Leased[0]
}

func waitExpired(t *testing.T, fe queue.FencedEntry) {
	t.Helper()
	time.Sleep(time.Until(fe.Execution.QueueLease.ExpiresAt.Time) + 100*time.Millisecond)
}

// A serve instance died holding a lease: a live instance's sweeper recovers
// it (same workflow and subject generation, lease generation +1), its
// worker runs it once, and a lease held by an outside worker is left alone.
func TestSweeperRecoversDeadBuiltinLeases(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, 2*time.Second)
	dir := t.TempDir()
	dead := issueItem(t, store, 1, false)
	deadLease := leaseAs(t, store, BuiltinOwnerPrefix+"dead")
	outside := issueItem(t, store, 2, false)
	outsideLease := leaseAs(t, store, "outside-worker")
	if deadLease.Entry.EntryID != dead.EntryID || outsideLease.Entry.EntryID != outside.EntryID {
		t.Fatal("leased in an unexpected order")
	}
	waitExpired(t, outsideLease)

	w := startWorker(t, store, pool, WorkerConfig{Poll: time.Minute,
		Exec: script(t, `echo "$GITLEASE_WORKFLOW_ID" >> '`+dir+`/runs'`)})
	sw := NewSweeper(store, w, SweeperConfig{Interval: 200 * time.Millisecond}, testLogger(t))
	if err := sw.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sw.Stop)

	done := waitStatus(t, store, dead.EntryID, queue.StatusCompleted, 15*time.Second)
	f := done.Fence()
	if f.WorkflowID != deadLease.Execution.WorkflowID || f.Subject.Generation != deadLease.Execution.Subject.Generation ||
		f.QueueLease.Generation != deadLease.Execution.QueueLease.Generation+1 || f.QueueLease.OwnerID != w.OwnerID() {
		t.Errorf("recovered fence %+v (lease %+v), want workflow %s, subject generation %d, lease generation %d, owner %s",
			f, f.QueueLease, deadLease.Execution.WorkflowID, deadLease.Execution.Subject.Generation,
			deadLease.Execution.QueueLease.Generation+1, w.OwnerID())
	}
	time.Sleep(time.Second) // more sweeps
	b, err := os.ReadFile(dir + "/runs")
	if err != nil {
		t.Fatal(err)
	}
	if runs := strings.Fields(string(b)); len(runs) != 1 || runs[0] != deadLease.Execution.WorkflowID {
		t.Errorf("runs = %q, want one, of workflow %s", runs, deadLease.Execution.WorkflowID)
	}

	o := getItem(t, store, outside.EntryID)
	if o.Status() != queue.StatusAssigned || o.Fence().QueueLease.OwnerID != "outside-worker" || o.Fence().QueueLease.Generation != 1 {
		t.Errorf("outside lease: status %s, fence %+v; want untouched", o.Status(), o.Fence().QueueLease)
	}
	res, err := sw.RunOnce(context.Background())
	if err != nil || res.Found != 0 {
		t.Errorf("sweep after recovery = %+v, %v; want nothing found", res, err)
	}
}

// Two instances sweep the same dead lease: exactly one recovers it.
func TestSweepersRaceForOneLease(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Second)
	dir := t.TempDir()
	dead := issueItem(t, store, 1, false)
	waitExpired(t, leaseAs(t, store, BuiltinOwnerPrefix+"dead"))
	exec := script(t, `echo run >> '`+dir+`/runs'`)
	var sweepers []*Sweeper
	for range 3 {
		w := startWorker(t, store, pool, WorkerConfig{Poll: time.Minute, Exec: exec})
		sweepers = append(sweepers, NewSweeper(store, w, SweeperConfig{}, testLogger(t)))
	}
	results := make(chan SweepResult, len(sweepers))
	for _, sw := range sweepers {
		go func() {
			res, err := sw.RunOnce(context.Background())
			if err != nil {
				t.Error(err)
			}
			results <- res
		}()
	}
	resumed := 0
	for range sweepers {
		resumed += (<-results).Resumed
	}
	if resumed != 1 {
		t.Errorf("%d sweepers resumed the lease, want 1", resumed)
	}
	waitStatus(t, store, dead.EntryID, queue.StatusCompleted, 15*time.Second)
	if b, _ := os.ReadFile(dir + "/runs"); strings.Count(string(b), "run") != 1 {
		t.Errorf("runs = %q, want one", b)
	}
}

// A recovered lease the worker has no slot for goes back to pending at
// once, and is leased again when a slot frees.
func TestSweeperReleasesWithoutAFreeSlot(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Second)
	dir := t.TempDir()
	dead := issueItem(t, store, 1, false)
	deadLease := leaseAs(t, store, BuiltinOwnerPrefix+"dead")
	busy := issueItem(t, store, 2, false)
	w := startWorker(t, store, pool, WorkerConfig{Slots: 1, Poll: time.Minute,
		Exec: script(t, `touch '`+dir+`/started.'"$GITLEASE_ENTRY_ID"; sleep 2`)})
	eventually(t, 10*time.Second, "slot taken", func() bool { return fileExists(dir + "/started." + busy.EntryID) })
	waitExpired(t, deadLease)
	sw := NewSweeper(store, w, SweeperConfig{}, testLogger(t))
	res, err := sw.RunOnce(context.Background())
	if err != nil || res.Released != 1 || res.Resumed != 0 {
		t.Fatalf("sweep = %+v, %v; want one released", res, err)
	}
	if r := auditReasons(t, pool, dead.EntryID); !slices.Contains(r, ReasonRecoveredNoSlot) {
		t.Errorf("audit reasons %q lack %q", r, ReasonRecoveredNoSlot)
	}
	done := waitStatus(t, store, dead.EntryID, queue.StatusCompleted, 15*time.Second)
	if f := done.Fence(); f.WorkflowID != deadLease.Execution.WorkflowID || f.QueueLease.Generation != 3 {
		t.Errorf("fence %+v / %+v: want the same workflow at lease generation 3 (dead, recovered, re-leased)", f, f.QueueLease)
	}
}

// An expired lease under the worker's own owner ID that it does not run
// (it lost track of a lease) cannot be recovered to itself: it is released.
func TestSweeperReleasesItsOwnForgottenLease(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Second)
	it := issueItem(t, store, 1, false)
	owner := BuiltinOwnerPrefix + "self"
	lease := leaseAs(t, store, owner)
	waitExpired(t, lease)
	w := startWorker(t, store, pool, WorkerConfig{OwnerID: owner, Poll: time.Minute})
	res, err := NewSweeper(store, w, SweeperConfig{}, testLogger(t)).RunOnce(context.Background())
	if err != nil || res.Released != 1 {
		t.Fatalf("sweep = %+v, %v; want one released", res, err)
	}
	waitStatus(t, store, it.EntryID, queue.StatusCompleted, 10*time.Second)
}
