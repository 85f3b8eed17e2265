package db

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/db/dbq"
)

// DefaultMaxConns is a pool's size unless DATABASE_URL sets pool_max_conns.
const DefaultMaxConns = 20

// ConnectTimeout bounds one connection attempt to one host.
const ConnectTimeout = 5 * time.Second

// URLError is returned by PoolConfig for a connection string gitlease
// cannot use. It never quotes the string, which may hold a password.
type URLError struct{ Problem string }

func (e *URLError) Error() string { return e.Problem }

// PoolConfig parses a connection string (DATABASE_URL: one host or
// several, in any order) into the configuration of every pool and
// listening connection gitlease makes, so that each of them only ever uses
// a server that takes writes (SPEC §9.1):
//
//   - a new connection is checked once authenticated: with
//     target_session_attrs=read-write or primary as pgx implements them,
//     and otherwise (none given, or any) as read-write, that is
//     transaction_read_only off, which a standby never is. A host that
//     fails the check is skipped for the next one; when none passes, the
//     connection fails with an error ReadOnly recognises.
//   - target_session_attrs read-only, standby and prefer-standby are
//     refused: gitlease writes.
//
// The pool is DefaultMaxConns large unless pool_max_conns says otherwise,
// each connection attempt is bounded by ConnectTimeout unless
// connect_timeout says otherwise, and AfterConnect prepares every
// connection. Pools are made from it by Open.
func PoolConfig(connString string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, &URLError{Problem: "not a valid Postgres connection string"}
	}
	if !strings.Contains(connString, "connect_timeout") {
		cfg.ConnConfig.ConnectTimeout = ConnectTimeout
	}
	if !strings.Contains(connString, "pool_max_conns") {
		// pgxpool's default, max(4, cores), makes concurrent deliveries
		// queue for a connection on a small machine.
		cfg.MaxConns = DefaultMaxConns
	}
	cfg.AfterConnect = AfterConnect
	switch v := cfg.ConnConfig.ValidateConnect; {
	case v == nil: // target_session_attrs unset or any
		cfg.ConnConfig.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	case sameFunc(v, pgconn.ValidateConnectTargetSessionAttrsReadWrite), sameFunc(v, pgconn.ValidateConnectTargetSessionAttrsPrimary):
	default:
		return nil, &URLError{Problem: "target_session_attrs must be read-write, primary or any: gitlease writes, and connects only to a server that takes writes"}
	}
	return cfg, nil
}

// sameFunc reports whether a and b are the same top-level function.
// pgconn exposes which target_session_attrs it parsed only as the check it
// installed.
func sameFunc(a, b pgconn.ValidateConnectFunc) bool {
	return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
}

// Open makes a pool from cfg (from PoolConfig), connecting lazily. A
// connection of the pool, or of a listener made from the pool's Config,
// that is told its server is read-only (SQLSTATE 25006: a primary demoted
// while it runs) or going away (57P01, 57P02) is closed, and so are the
// pool's other connections, which are on the same server: the next ones
// are made afresh, on whichever host takes writes then.
func Open(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	cfg = cfg.Copy()
	var self atomic.Pointer[pgxpool.Pool]
	next := cfg.ConnConfig.OnPgError
	cfg.ConnConfig.OnPgError = func(c *pgconn.PgConn, pgErr *pgconn.PgError) bool {
		switch pgErr.Code {
		case readOnlyTransaction, adminShutdown, crashShutdown:
			if p := self.Load(); p != nil {
				// Reset closes idle connections now and the acquired
				// ones (this one too) when they are released.
				go p.Reset()
			}
			return false
		}
		return next == nil || next(c, pgErr)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create Postgres pool: %w", err)
	}
	self.Store(pool)
	return pool, nil
}

const (
	// readOnlyTransaction is SQLSTATE 25006, read_only_sql_transaction: a
	// write on a read-only server.
	readOnlyTransaction = "25006"
	// adminShutdown and crashShutdown (57P01, 57P02) end a session when its
	// server shuts down or its postmaster dies: the pool's other sessions
	// on it end too.
	adminShutdown = "57P01"
	crashShutdown = "57P02"
)

// ReadOnly reports whether err says the server is read-only: a connection
// that found no host taking writes (each one that answered was a standby,
// or a primary set read-only), or a write refused with SQLSTATE 25006.
// Such an error is transient: a failover is under way, or the operator
// pointed DATABASE_URL at standbys only.
func ReadOnly(err error) bool {
	if errors.Is(err, pgconn.ErrReadOnlyConnection) || errors.Is(err, pgconn.ErrStandbyConnection) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == readOnlyTransaction
}

// Durability says whether a commit acknowledged to gitlease survives the
// loss of its primary.
type Durability string

const (
	// DurabilitySynchronousStandby: the primary acknowledges a commit once a
	// synchronous standby has it too (synchronous_standby_names set,
	// synchronous_commit on or remote_apply), so a failover to that
	// standby loses no delivery answered 2xx.
	DurabilitySynchronousStandby Durability = "synchronous_standby"
	// DurabilityLocal: a commit is acknowledged once it is on the
	// primary's own disk (or sooner, with synchronous_commit off or local),
	// so a failover can lose the last ones.
	DurabilityLocal Durability = "local"
)

// Server is what a session learns of its server.
type Server struct {
	// ReadOnly is set on a standby and on a primary set read-only.
	ReadOnly   bool
	Durability Durability
	// The settings Durability is read from, as this session sees them.
	SynchronousStandbyNames, SynchronousCommit string
}

// ReadServerFresh is ReadServer on a connection of its own, made with
// cfg's settings and closed after: it says what a new connection of the
// pool would find, where the pool's own may be cut already.
func ReadServerFresh(ctx context.Context, cfg *pgxpool.Config) (Server, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return Server{}, fmt.Errorf("connect to read the database server's state: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return ReadServer(ctx, conn)
}

// ReadServer asks the server one of pool's connections is on what it is.
// On a pool from Open the connection is on a server that took writes when
// it connected.
func ReadServer(ctx context.Context, pool dbq.DBTX) (Server, error) {
	row, err := dbq.New().ServerState(ctx, pool)
	if err != nil {
		return Server{}, fmt.Errorf("read the database server's state: %w", err)
	}
	s := Server{ReadOnly: row.InRecovery || row.ReadOnly, Durability: DurabilityLocal,
		SynchronousStandbyNames: row.SynchronousStandbyNames, SynchronousCommit: row.SynchronousCommit}
	if strings.TrimSpace(row.SynchronousStandbyNames) != "" &&
		(row.SynchronousCommit == "on" || row.SynchronousCommit == "remote_apply") {
		s.Durability = DurabilitySynchronousStandby
	}
	return s, nil
}
