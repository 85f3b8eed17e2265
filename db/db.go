// Package db owns gitlease's PostgreSQL schema: the embedded migrations, the
// sqlc queries (generated into db/dbq) and Migrate, which applies them; and
// how gitlease connects: PoolConfig and Open make every pool and listening
// connection, which only ever use a server that takes writes, and
// ReadServer says whether a server is read-only and how durable a commit
// acknowledged to gitlease is.
package db

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the embedded SQL migrations, in the layout goose reads.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// newProvider returns a goose provider over pool that serialises migrators
// with a Postgres session advisory lock, so concurrent Migrate calls (several
// `gitlease migrate` or `serve` processes) are safe.
func newProvider(pool *pgxpool.Pool) (*goose.Provider, *sql.DB, error) {
	sqlDB := stdlib.OpenDBFromPool(pool)
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		sqlDB.Close()
		return nil, nil, fmt.Errorf("create migration locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, Migrations(), goose.WithSessionLocker(locker))
	if err != nil {
		sqlDB.Close()
		return nil, nil, fmt.Errorf("create migration provider: %w", err)
	}
	return p, sqlDB, nil
}

// Migrate applies every embedded migration that the database has not yet
// recorded, in order, each in its own transaction, under an advisory lock.
// An interrupted run leaves no partial migration behind, so running Migrate
// again always converges on the same schema. It returns the number of
// migrations applied by this call.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	p, sqlDB, err := newProvider(pool)
	if err != nil {
		return 0, err
	}
	defer sqlDB.Close()
	results, err := p.Up(ctx)
	if err != nil {
		return len(results), fmt.Errorf("apply migrations: %w", err)
	}
	return len(results), nil
}

// SchemaStatus says how far the database schema is from what this binary needs.
type SchemaStatus struct {
	Current int64 // highest applied migration version (0 when none)
	Target  int64 // highest embedded migration version
}

// Ready reports whether the database is at the version this binary needs.
func (s SchemaStatus) Ready() bool { return s.Current >= s.Target }

// Status reads the applied schema version. It does not take the migration
// lock, so it answers while a migration runs elsewhere, and it only reads: on
// a database that was never migrated it reports Current 0 without creating
// goose's version table.
func Status(ctx context.Context, pool *pgxpool.Pool) (SchemaStatus, error) {
	p, sqlDB, err := newProvider(pool)
	if err != nil {
		return SchemaStatus{}, err
	}
	defer sqlDB.Close()
	var st SchemaStatus
	if srcs := p.ListSources(); len(srcs) > 0 {
		st.Target = srcs[len(srcs)-1].Version
	}
	// goose's GetDBVersion creates its table when it is missing; look first,
	// through the search path as goose does.
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", goose.DefaultTablename).Scan(&exists); err != nil {
		return st, fmt.Errorf("look for the schema version table: %w", err)
	}
	if !exists {
		return st, nil
	}
	st.Current, err = p.GetDBVersion(ctx)
	if err != nil && !errors.Is(err, goose.ErrNoMigrations) {
		return st, fmt.Errorf("read schema version: %w", err)
	}
	return st, nil
}
