package ui

import (
	"context"
	"testing"
	"time"

	"github.com/gitlease/gitlease/db/dbtest"
)

// TestSessionPruners: each pruner deletes exactly the rows whose time is
// over (by its retention) and keeps the rest, the live block included.
func TestSessionPruners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	now := time.Now()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO ui_signed_out (nonce, expires_at) VALUES ('expired', $1), ('live', $2)`, now.Add(-time.Hour), now.Add(time.Hour))
	exec(`INSERT INTO ui_login_failures (client, window_start, failures, blocked_until) VALUES
		('old', $1, 3, NULL), ('old-blocked', $1, 5, $2), ('blocked', $1, 5, $3), ('recent', $4, 1, NULL)`,
		now.Add(-time.Hour), now.Add(-50*time.Minute), now.Add(time.Minute), now.Add(-30*time.Second))

	if n, err := NewSignOutPruner(pool, nil).RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("sign-out pruner deleted %d (%v), want 1", n, err)
	}
	if n, err := NewLoginFailurePruner(pool, nil).RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("failed sign-in pruner deleted %d (%v), want 2", n, err)
	}
	var left []string
	rows, err := pool.Query(ctx, `SELECT nonce FROM ui_signed_out UNION ALL SELECT client FROM ui_login_failures ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		left = append(left, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"blocked", "live", "recent"}; len(left) != 3 || left[0] != want[0] || left[1] != want[1] || left[2] != want[2] {
		t.Fatalf("rows left %v, want %v", left, want)
	}
}
