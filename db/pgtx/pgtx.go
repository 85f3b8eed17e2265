// Package pgtx runs a PostgreSQL transaction whose BEGIN travels with its
// first statement, and whose chosen statements travel with the statement
// after them or with its COMMIT (pgx batches: one write and one round trip
// each), so a short transaction — a webhook delivery's: BEGIN + item
// insert, delivery insert + COMMIT — costs two round trips instead of four.
package pgtx

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/db/dbq"
)

// lazyTx is the pgx.Tx Run hands its function. It sends BEGIN in the
// same pipelined batch (pgx.Batch.BeginTx: one write, one Sync) as the
// transaction's first statement, instead of in a round trip of its own: a
// webhook delivery's transaction is BEGIN + item insert, delivery insert,
// COMMIT in three round trips rather than four. The transaction is exactly
// the one BEGIN would have started before that statement, and from then on
// every call goes to pgx's own transaction; one that runs no statement
// sends nothing at all.
type lazyTx struct {
	conn     *pgx.Conn
	tx       pgx.Tx // nil until begun
	closed   bool
	withNext []*pgx.QueuedQuery // statements sent with the next one (WithNext)
	atCommit []*pgx.QueuedQuery // statements sent with COMMIT (AtCommit)
}

var _ pgx.Tx = (*lazyTx)(nil)

// begun returns the transaction, beginning it on its own if no statement
// has begun it yet and sending the statements queued with WithNext (for
// the methods that cannot carry them along).
func (tx *lazyTx) begun(ctx context.Context) (pgx.Tx, error) {
	if tx.closed {
		return nil, pgx.ErrTxClosed
	}
	if tx.tx == nil {
		t, err := tx.conn.Begin(ctx)
		if err != nil {
			return nil, err
		}
		tx.tx = t
	}
	if len(tx.withNext) > 0 {
		queued := tx.withNext
		tx.withNext = nil
		if err := tx.tx.SendBatch(ctx, &pgx.Batch{QueuedQueries: queued}).Close(); err != nil {
			return nil, err
		}
	}
	return tx.tx, nil
}

// direct reports whether a statement can go to pgx's transaction as it
// is: the transaction has begun and no statement waits to go with it.
func (tx *lazyTx) direct() bool { return tx.tx != nil && len(tx.withNext) == 0 }

// batch sends sql in one batch after what must go first: BEGIN, if the
// transaction has not begun, and the statements queued with WithNext. A
// failure of one of those is the error. The caller reads sql's result and
// closes the batch.
func (tx *lazyTx) batch(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	var br pgx.BatchResults
	begin := tx.tx == nil
	if begin {
		b.BeginTx(pgx.TxOptions{})
	}
	b.QueuedQueries = append(b.QueuedQueries, tx.withNext...)
	b.Queue(sql, args...)
	ahead := len(b.QueuedQueries) - 1
	tx.withNext = nil
	if begin {
		br = tx.conn.SendBatch(ctx, b)
		tx.tx = br.Tx()
	} else {
		br = tx.tx.SendBatch(ctx, b)
	}
	for range ahead { // BEGIN's result, and those of the statements queued
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	return br, nil
}

// Begin implements pgx.Tx: a savepoint in the transaction.
func (tx *lazyTx) Begin(ctx context.Context) (pgx.Tx, error) {
	t, err := tx.begun(ctx)
	if err != nil {
		return nil, err
	}
	return t.Begin(ctx)
}

// Exec implements pgx.Tx.
func (tx *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if tx.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	if tx.direct() {
		return tx.tx.Exec(ctx, sql, args...)
	}
	br, err := tx.batch(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query implements pgx.Tx.
func (tx *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if tx.closed {
		return nil, pgx.ErrTxClosed
	}
	if tx.direct() {
		return tx.tx.Query(ctx, sql, args...)
	}
	br, err := tx.batch(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow implements pgx.Tx.
func (tx *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if !tx.closed && tx.direct() {
		return tx.tx.QueryRow(ctx, sql, args...)
	}
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return pgxRow{rows}
}

// Commit implements pgx.Tx. The statements still queued with WithNext,
// then those queued with AtCommit, go in one batch with COMMIT: if one
// fails, the transaction is rolled back and Commit returns that statement's
// error.
func (tx *lazyTx) Commit(ctx context.Context) error {
	if tx.closed {
		return pgx.ErrTxClosed
	}
	tx.atCommit = append(tx.withNext, tx.atCommit...)
	tx.withNext = nil
	if len(tx.atCommit) == 0 {
		tx.closed = true
		if tx.tx == nil {
			return nil
		}
		return tx.tx.Commit(ctx)
	}
	tx.closed = true
	b := &pgx.Batch{}
	results := len(tx.atCommit)
	if tx.tx == nil { // nothing ran yet: BEGIN goes in the batch too
		b.BeginTx(pgx.TxOptions{})
		results++
	}
	b.QueuedQueries = append(b.QueuedQueries, tx.atCommit...)
	b.Queue("commit")
	br := tx.conn.SendBatch(ctx, b)
	if tx.tx == nil {
		tx.tx = br.Tx()
	}
	var err error
	for range results {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// A failed statement skips the COMMIT after it: end the
		// transaction. pgx's own Rollback closes a connection it cannot
		// roll back.
		if tx.conn.PgConn().TxStatus() != 'I' {
			_ = tx.tx.Rollback(ctx)
		}
		return err
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// AtCommit returns tx for a statement whose result its caller does not
// need until the commit: Exec on it queues the statement, which goes to the
// database in one batch with COMMIT (one round trip for both) when tx is a
// Run transaction, and its failure (a unique violation, say) is Commit's
// error, after which the transaction is rolled back. Any other tx executes
// the statement at once. Query and QueryRow are not deferred.
func AtCommit(tx pgx.Tx) dbq.DBTX {
	if l, ok := tx.(*lazyTx); ok {
		return atCommitTx{l}
	}
	return tx
}

type atCommitTx struct{ *lazyTx }

// WithNext returns tx for a statement that only prepares the transaction's
// next one (a setting for its plan, say): Exec on it queues the statement,
// which goes to the database in one batch with the next statement tx runs
// (or with COMMIT) when tx is a Run transaction; its failure is the error
// of the call that sends it. Any other tx executes the statement at once.
// Query and QueryRow are not deferred.
func WithNext(tx pgx.Tx) dbq.DBTX {
	if l, ok := tx.(*lazyTx); ok {
		return withNextTx{l}
	}
	return tx
}

type withNextTx struct{ *lazyTx }

// Exec queues the statement for the next one and reports nothing yet.
func (w withNextTx) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if w.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	w.withNext = append(w.withNext, &pgx.QueuedQuery{SQL: sql, Arguments: args})
	return pgconn.CommandTag{}, nil
}

// Exec queues the statement for the commit and reports nothing yet.
func (a atCommitTx) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if a.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	a.atCommit = append(a.atCommit, &pgx.QueuedQuery{SQL: sql, Arguments: args})
	return pgconn.CommandTag{}, nil
}

// Rollback implements pgx.Tx.
func (tx *lazyTx) Rollback(ctx context.Context) error {
	if tx.closed {
		return pgx.ErrTxClosed
	}
	tx.closed = true
	if tx.tx == nil {
		return nil
	}
	return tx.tx.Rollback(ctx)
}

// CopyFrom implements pgx.Tx.
func (tx *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	t, err := tx.begun(ctx)
	if err != nil {
		return 0, err
	}
	return t.CopyFrom(ctx, table, columns, src)
}

// SendBatch implements pgx.Tx.
func (tx *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	t, err := tx.begun(ctx)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return t.SendBatch(ctx, b)
}

// LargeObjects implements pgx.Tx. It has no context to begin the
// transaction with: call it after a statement (or Begin) has begun it.
func (tx *lazyTx) LargeObjects() pgx.LargeObjects {
	t, err := tx.begun(context.Background())
	if err != nil {
		panic(fmt.Sprintf("pgtx: large objects outside a begun transaction: %v", err))
	}
	return t.LargeObjects()
}

// Prepare implements pgx.Tx.
func (tx *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	t, err := tx.begun(ctx)
	if err != nil {
		return nil, err
	}
	return t.Prepare(ctx, name, sql)
}

// Conn implements pgx.Tx.
func (tx *lazyTx) Conn() *pgx.Conn { return tx.conn }

// batchRows are the rows of the batch's statement; closing them closes the
// batch, whose error (the statement's, or the Sync's) they report.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Close() {
	if r.br == nil {
		return
	}
	r.Rows.Close()
	if err := r.br.Close(); err != nil && r.Rows.Err() == nil {
		r.err = err
	}
	r.br = nil
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// pgxRow is pgx's QueryRow over rows: the first row, pgx.ErrNoRows without
// one, and the statement's error.
type pgxRow struct{ rows pgx.Rows }

func (r pgxRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		r.rows.Close()
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// Run runs fn in a transaction on a connection of pool, committing it if
// fn returns nil and rolling it back otherwise (or if fn panics). BEGIN goes
// to the database with fn's first statement; a function that runs no
// statement sends nothing. The transaction does not nest. It returns fn's
// error, or the commit's (a statement queued with AtCommit failing, say).
func Run(ctx context.Context, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) (err error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection: %w", err)
	}
	defer c.Release() // destroys a connection left inside a transaction
	tx := &lazyTx{conn: c.Conn()}
	defer func() {
		if !tx.closed { // fn panicked
			_ = tx.Rollback(ctx)
		}
	}()
	if err := fn(tx); err != nil {
		_ = tx.Rollback(ctx)
		return err
	}
	return tx.Commit(ctx)
}
