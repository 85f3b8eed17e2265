package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/db/prune"
)

// TestPruneOutbox: rows sent before the cut-off go, in batches; rows sent
// since, pending rows and failed rows stay.
func TestPruneOutbox(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	now := time.Now()
	old, recent := now.Add(-30*24*time.Hour), now.Add(-time.Hour)
	rows := []struct {
		status   string
		finished *time.Time
		n        int
	}{
		{"done", &old, 5}, {"done", &recent, 2}, {"failed", &old, 3}, {"pending", nil, 4},
	}
	for _, r := range rows {
		for i := 0; i < r.n; i++ {
			if _, err := pool.Exec(ctx, `INSERT INTO outbox (lane, kind, payload, created_at, available_at, status, finished_at)
				VALUES ('l', 'check_run', '{}', $1, $1, $2, $3)`, old, r.status, r.finished); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := outbox.NewPruner(pool, prune.Config{Batch: 2, Now: func() time.Time { return now }}, nil).RunOnce(ctx)
	if err != nil || n != 5 {
		t.Fatalf("RunOnce = %d, %v; want the 5 old sent rows", n, err)
	}
	left := map[string]int{}
	r, err := pool.Query(ctx, `SELECT status, count(*) FROM outbox GROUP BY status`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var s string
		var c int
		if err := r.Scan(&s, &c); err != nil {
			t.Fatal(err)
		}
		left[s] = c
	}
	if left["done"] != 2 || left["failed"] != 3 || left["pending"] != 4 {
		t.Errorf("left %v, want 2 recent done, 3 failed, 4 pending", left)
	}
}
