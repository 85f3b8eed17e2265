package pgtx

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gitlease/gitlease/db/dbtest"
)

// TestRunBeginsWithTheFirstStatement: the transaction Run runs begins
// with its first statement (sent in one batch with BEGIN), whichever of
// Exec, Query and QueryRow that is; every statement after it is in the same
// transaction; an error rolls all of it back; a first statement that fails
// (a unique violation) reports the database's error and leaves the pool
// usable; a transaction without statements commits nothing; savepoints work.
func TestRunBeginsWithTheFirstStatement(t *testing.T) {
	pool := dbtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE lazy_tx_probe (k int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM lazy_tx_probe`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	xact := func(ctx context.Context, tx pgx.Tx) (id string) {
		t.Helper()
		if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	first := map[string]func(ctx context.Context, tx pgx.Tx) error{
		"Exec": func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO lazy_tx_probe VALUES (1)`)
			return err
		},
		"Query": func(ctx context.Context, tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `INSERT INTO lazy_tx_probe VALUES (1), (2) RETURNING k`)
			if err != nil {
				return err
			}
			n := 0
			for rows.Next() {
				n++
			}
			rows.Close()
			if err == nil && n != 2 {
				t.Errorf("Query as the first statement returned %d rows, want 2", n)
			}
			return rows.Err()
		},
		"QueryRow": func(ctx context.Context, tx pgx.Tx) error {
			var k int
			return tx.QueryRow(ctx, `INSERT INTO lazy_tx_probe VALUES (1) RETURNING k`).Scan(&k)
		},
	}
	for name, stmt := range first {
		t.Run(name, func(t *testing.T) {
			if _, err := pool.Exec(ctx, `TRUNCATE lazy_tx_probe`); err != nil {
				t.Fatal(err)
			}
			err := Run(ctx, pool, func(tx pgx.Tx) error {
				if err := stmt(ctx, tx); err != nil {
					return err
				}
				a, b := xact(ctx, tx), xact(ctx, tx)
				if a != b {
					t.Errorf("statements after the first ran in transactions %s and %s", a, b)
				}
				return errors.New("roll it back")
			})
			if err == nil || err.Error() != "roll it back" {
				t.Fatalf("InTx = %v, want the body's error", err)
			}
			if n := count(); n != 0 {
				t.Errorf("a rolled back transaction left %d rows", n)
			}
			if err := Run(ctx, pool, func(tx pgx.Tx) error { return stmt(ctx, tx) }); err != nil {
				t.Fatalf("commit: %v", err)
			}
			if n := count(); n == 0 {
				t.Error("a committed transaction left no rows")
			}
			// The same first statement again violates the primary key.
			err = Run(ctx, pool, func(tx pgx.Tx) error { return stmt(ctx, tx) })
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
				t.Fatalf("a failing first statement: %v, want a unique violation", err)
			}
		})
	}
	if err := Run(ctx, pool, func(pgx.Tx) error { return nil }); err != nil {
		t.Errorf("a transaction without statements: %v", err)
	}
	if _, err := pool.Exec(ctx, `TRUNCATE lazy_tx_probe`); err != nil {
		t.Fatal(err)
	}
	err := Run(ctx, pool, func(tx pgx.Tx) error {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := sp.Exec(ctx, `INSERT INTO lazy_tx_probe VALUES (7)`); err != nil {
			return err
		}
		if err := sp.Rollback(ctx); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO lazy_tx_probe VALUES (8)`)
		return err
	})
	var k int
	if err != nil || pool.QueryRow(ctx, `SELECT k FROM lazy_tx_probe`).Scan(&k) != nil || k != 8 {
		t.Errorf("savepoint: InTx %v, row %d; want only 8", err, k)
	}
	if st := pool.Stat(); st.AcquiredConns() != 0 {
		t.Errorf("%d connections still acquired", st.AcquiredConns())
	}
}

// TestWithNextGoesFirst: a statement queued with WithNext runs in the
// transaction right before the next statement, whichever way that one is
// sent (the first statement, a later one, a savepoint, COMMIT), so a local
// setting it makes holds for that statement; its failure is that call's
// error and rolls the transaction back.
func TestWithNextGoesFirst(t *testing.T) {
	pool := dbtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE with_next_probe (k int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	set := func(ctx context.Context, tx pgx.Tx, v string) {
		t.Helper()
		if _, err := WithNext(tx).Exec(ctx, `SELECT set_config('gitlease.probe', $1, true)`, v); err != nil {
			t.Fatal(err)
		}
	}
	setting := func(ctx context.Context, q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) (v string) {
		t.Helper()
		if err := q.QueryRow(ctx, `SELECT current_setting('gitlease.probe', true)`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	err := Run(ctx, pool, func(tx pgx.Tx) error {
		set(ctx, tx, "first")
		if v := setting(ctx, tx); v != "first" {
			t.Errorf("as the first statement's: setting %q, want first", v)
		}
		set(ctx, tx, "later")
		if v := setting(ctx, tx); v != "later" {
			t.Errorf("before a later statement: setting %q, want later", v)
		}
		set(ctx, tx, "savepoint")
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		if v := setting(ctx, sp); v != "savepoint" {
			t.Errorf("before a savepoint: setting %q, want savepoint", v)
		}
		return sp.Commit(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	// Queued last, it goes with COMMIT; queued first, with the first statement.
	if err := Run(ctx, pool, func(tx pgx.Tx) error {
		_, err := WithNext(tx).Exec(ctx, `INSERT INTO with_next_probe VALUES (1)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	err = Run(ctx, pool, func(tx pgx.Tx) error {
		if _, err := WithNext(tx).Exec(ctx, `INSERT INTO with_next_probe VALUES (1)`); err != nil {
			t.Fatal("queueing reported an error before sending")
		}
		_, err := tx.Exec(ctx, `INSERT INTO with_next_probe VALUES (2)`)
		return err
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("a failing queued statement: %v, want its unique violation", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM with_next_probe`).Scan(&n); err != nil || n != 1 {
		t.Errorf("after the failed transaction: %d rows (%v), want the one committed", n, err)
	}
	if v := setting(ctx, pool); v != "" {
		t.Errorf("a local setting outlived its transaction: %q", v)
	}
	if st := pool.Stat(); st.AcquiredConns() != 0 {
		t.Errorf("%d connections still acquired", st.AcquiredConns())
	}
}
