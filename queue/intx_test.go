package queue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gitlease/gitlease/queue"
)

// TestAtCommit: a statement queued with queue.AtCommit runs in the
// transaction, sent with its COMMIT; when it fails, the whole transaction
// is rolled back and InTx returns its error; when the body fails, it never
// runs. It works as the transaction's only statement too.
func TestAtCommit(t *testing.T) {
	store, pool, _ := newStore(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE at_commit_probe (k int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	keys := func() (ks []int) {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT k FROM at_commit_probe ORDER BY k`)
		if err != nil {
			t.Fatal(err)
		}
		ks, err = pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
	insert := func(ctx context.Context, db interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}, k int) error {
		_, err := db.Exec(ctx, `INSERT INTO at_commit_probe VALUES ($1)`, k)
		return err
	}
	// Only statement, then after another statement.
	if err := store.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error { return insert(ctx, queue.AtCommit(tx), 1) }); err != nil {
		t.Fatalf("AtCommit alone: %v", err)
	}
	if err := store.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := insert(ctx, tx, 2); err != nil {
			return err
		}
		return insert(ctx, queue.AtCommit(tx), 3)
	}); err != nil {
		t.Fatalf("AtCommit after a statement: %v", err)
	}
	// A deferred statement that fails rolls back the statement before it.
	err := store.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := insert(ctx, tx, 4); err != nil {
			return err
		}
		return insert(ctx, queue.AtCommit(tx), 1)
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" || !queue.IsRetryable(err) {
		t.Fatalf("a failing deferred statement: %v, want a (retryable) unique violation", err)
	}
	// A failing body never sends it.
	err = store.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := insert(ctx, queue.AtCommit(tx), 5); err != nil {
			return err
		}
		return errors.New("no")
	})
	if err == nil {
		t.Fatal("a failing body committed")
	}
	if got := keys(); len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Errorf("rows %v, want [1 2 3]", got)
	}
	if st := pool.Stat(); st.AcquiredConns() != 0 {
		t.Errorf("%d connections still acquired", st.AcquiredConns())
	}
}
