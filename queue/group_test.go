package queue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/queue"
)

// One group enqueues each request as Enqueue would have, in one
// transaction that stays usable: new subjects get their next generation,
// and a request whose key, subject or branch is taken, by the queue or by
// an earlier request of the group, writes nothing.
func TestEnqueueGroupTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, _ := newStore(t)
	live := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(1), IdempotencyKey: "first", Reservation: reservation("refs/heads/gitlease/issue-1")})
	// Subject 2 had a generation before: its next one is 2.
	done := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(2), IdempotencyKey: "earlier", Reservation: reservation("refs/heads/gitlease/issue-2")})
	if _, err := s.Drop(ctx, done.EntryID); err != nil {
		t.Fatal(err)
	}
	withRunAt := queue.EnqueueParams{Dispatch: issue(9), IdempotencyKey: "run-at", RunAt: "2030-01-01T00:00:00Z", Reservation: reservation("refs/heads/gitlease/issue-9")}
	cases := []struct {
		name    string
		p       queue.EnqueueParams
		wantGen uint64 // 0: not enqueued
		wantErr error  // queue.ErrTaken, or nil for an *InvalidError when wantGen is 0
	}{
		{"new subject", queue.EnqueueParams{Dispatch: issue(3), IdempotencyKey: "d3", Reservation: reservation("refs/heads/gitlease/issue-3")}, 1, nil},
		{"subject with an ended generation", queue.EnqueueParams{Dispatch: issue(2), IdempotencyKey: "d2", Reservation: reservation("refs/heads/gitlease/issue-2")}, 2, nil},
		{"bound key", queue.EnqueueParams{Dispatch: issue(4), IdempotencyKey: "first", Reservation: reservation("refs/heads/gitlease/issue-4")}, 0, queue.ErrTaken},
		{"live subject", queue.EnqueueParams{Dispatch: issue(1), IdempotencyKey: "d1", Reservation: reservation("refs/heads/gitlease/issue-1b")}, 0, queue.ErrTaken},
		{"held branch", queue.EnqueueParams{Dispatch: issue(5), IdempotencyKey: "d5", Reservation: reservation("refs/heads/gitlease/issue-1")}, 0, queue.ErrTaken},
		{"subject earlier in the group", queue.EnqueueParams{Dispatch: issue(3), IdempotencyKey: "d3b", Reservation: reservation("refs/heads/gitlease/issue-3b")}, 0, queue.ErrTaken},
		{"branch earlier in the group", queue.EnqueueParams{Dispatch: issue(6), IdempotencyKey: "d6", Reservation: reservation("refs/heads/gitlease/issue-3")}, 0, queue.ErrTaken},
		{"key earlier in the group", queue.EnqueueParams{Dispatch: issue(7), IdempotencyKey: "d3", Reservation: reservation("refs/heads/gitlease/issue-7")}, 0, queue.ErrTaken},
		{"malformed", queue.EnqueueParams{Dispatch: queue.SubjectDispatch{WorkflowRef: "coding"}, IdempotencyKey: "d8"}, 0, nil},
		{"with run_at, by a statement of its own", withRunAt, 1, nil},
	}
	ps := make([]queue.EnqueueParams, len(cases))
	for i, tc := range cases {
		ps[i] = tc.p
	}
	var answers []queue.GroupAnswer
	err := s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		answers, err = s.EnqueueGroupTx(ctx, tx, ps)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	enqueued := 0
	for i, tc := range cases {
		a := answers[i]
		var inv *queue.InvalidError
		switch {
		case tc.wantGen > 0:
			if a.Err != nil || !a.Result.Enqueued || a.Result.Subject.Generation != tc.wantGen {
				t.Errorf("%s: %+v, want generation %d", tc.name, a, tc.wantGen)
				continue
			}
			enqueued++
			if got, err := s.Get(ctx, a.Result.EntryID); err != nil || got.Status() != queue.StatusPending || got.Generation() != tc.wantGen {
				t.Errorf("%s: stored %+v (%v)", tc.name, got, err)
			}
		case tc.wantErr != nil:
			if !errors.Is(a.Err, tc.wantErr) {
				t.Errorf("%s: %+v, want %v", tc.name, a, tc.wantErr)
			}
		case !errors.As(a.Err, &inv):
			t.Errorf("%s: %+v, want an invalid request", tc.name, a)
		}
	}
	if n := count(t, pool, "SELECT count(*) FROM work_items"); n != 2+enqueued {
		t.Errorf("%d items, want %d", n, 2+enqueued)
	}
	if n := count(t, pool, "SELECT last_generation FROM subject_generations WHERE qualified_id = $1", live.Subject.QualifiedID); n != 1 {
		t.Errorf("the live subject's last generation is %d, want 1: a taken request allocated one", n)
	}
}
