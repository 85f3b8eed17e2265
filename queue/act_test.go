package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gitlease/gitlease/queue"
)

func TestAct(t *testing.T) {
	t.Parallel()
	s, _, clk := newStore(t)
	ctx := context.Background()
	id := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(1)}).EntryID
	leased := mustEnqueue(t, s, queue.EnqueueParams{Dispatch: issue(2)}).EntryID
	if err := s.Act(ctx, queue.ActParams{EntryID: id, Action: queue.ActionHold, Actor: "op"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lease(ctx, queue.LeaseParams{Max: 1, OwnerID: "w", WorkflowIDs: []string{"wf"}}); err != nil {
		t.Fatal(err)
	}
	var na *queue.NotActionableError
	var inv *queue.InvalidError
	steps := []struct {
		entry, action, actor string
		check                func(error) bool
		status               string
	}{
		{id, queue.ActionHold, "op", func(err error) bool { return errors.As(err, &na) && na.Status == "held" }, queue.StatusHeld},
		{id, queue.ActionRelease, "op", func(err error) bool { return err == nil }, queue.StatusPending},
		{leased, queue.ActionDrop, "op", func(err error) bool { return errors.As(err, &na) && na.Status == "assigned" }, queue.StatusAssigned},
		{leased, queue.ActionReclaim, "op", func(err error) bool { return errors.As(err, &na) }, queue.StatusAssigned},
		{leased, "explode", "op", func(err error) bool { return errors.As(err, &inv) }, queue.StatusAssigned},
		{leased, queue.ActionHold, " ", func(err error) bool { return errors.As(err, &inv) }, queue.StatusAssigned},
		{uuid.NewString(), queue.ActionHold, "op", func(err error) bool { return errors.Is(err, queue.ErrNotFound) }, ""},
		{id, queue.ActionDrop, "op", func(err error) bool { return err == nil }, queue.StatusDropped},
		{id, queue.ActionDrop, "op", func(err error) bool { return errors.As(err, &na) && na.Status == "dropped" }, queue.StatusDropped},
	}
	for i, st := range steps {
		err := s.Act(ctx, queue.ActParams{EntryID: st.entry, Action: st.action, Actor: st.actor})
		if !st.check(err) {
			t.Fatalf("step %d (%s): unexpected error %v", i, st.action, err)
		}
		if st.status != "" {
			if it, _ := s.Get(ctx, st.entry); it.Status() != st.status {
				t.Fatalf("step %d (%s): status %s, want %s", i, st.action, it.Status(), st.status)
			}
		}
	}
	clk.Advance(ttl + time.Second)
	if err := s.Act(ctx, queue.ActParams{EntryID: leased, Action: queue.ActionReclaim, Actor: "op"}); err != nil {
		t.Fatalf("reclaim of an expired lease: %v", err)
	}
	if it, _ := s.Get(ctx, leased); it.Status() != queue.StatusPending || it.Fence() == nil {
		t.Fatalf("after reclaim: %s, fence %v (kept, so the old owner's is stale)", it.Status(), it.Fence())
	}
}
