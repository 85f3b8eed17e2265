package webhook_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/db/prune"
	"github.com/gitlease/gitlease/webhook"
)

// TestPruner: deliveries older than the retention are deleted in batches,
// newer ones and every work item are kept.
func TestPruner(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	post := func(at time.Time, id string) {
		opts := defaultOptions()
		opts.handler.Now = func() time.Time { return at }
		e := newEnvOn(t, pool, opts)
		if status, _ := e.post(t, request{event: "ping", delivery: id, body: payload(t, "ping")}); status != 200 {
			t.Fatalf("post %s: %d", id, status)
		}
	}
	for i := range 5 {
		post(now.Add(-31*24*time.Hour-time.Duration(i)*time.Minute), fmt.Sprintf("old-%d", i))
	}
	post(now.Add(-29*24*time.Hour), "recent")
	// An enqueued delivery, old too: its item stays.
	{
		opts := defaultOptions()
		opts.handler.Now = func() time.Time { return now.Add(-40 * 24 * time.Hour) }
		if status, _ := newEnvOn(t, pool, opts).post(t, request{event: "issues", delivery: "old-enqueue", body: payload(t, "issues-opened")}); status != 202 {
			t.Fatalf("enqueue: %d", status)
		}
	}
	e := &testEnv{pool: pool}

	p := webhook.NewPruner(pool, prune.Config{Batch: 2, Now: func() time.Time { return now }}, discardLogger())
	n, err := p.RunOnce(context.Background())
	if err != nil || n != 6 {
		t.Fatalf("RunOnce = %d, %v; want 6", n, err)
	}
	if got := e.count(t, "deliveries"); got != 1 {
		t.Errorf("%d deliveries left, want 1", got)
	}
	e.delivery(t, "recent")
	if got := e.count(t, "work_items"); got != 1 {
		t.Errorf("%d work items left, want 1", got)
	}
	if n, err := p.RunOnce(context.Background()); err != nil || n != 0 {
		t.Errorf("second RunOnce = %d, %v", n, err)
	}
}
