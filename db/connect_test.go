package db_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/db"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/db/pgcluster"
)

// TestPoolConfigTargetSessionAttrs: every pool checks on connect that its
// server takes writes: pgx's read-write or primary check where the URL
// asks for one, read-write where it asks for none (or any); a URL asking
// for a read-only session is refused.
func TestPoolConfigTargetSessionAttrs(t *testing.T) {
	t.Parallel()
	base := "postgres://u@127.0.0.1:1,127.0.0.1:2/x?sslmode=disable"
	for _, tsa := range []string{"", "any", "read-write", "primary"} {
		u := base
		if tsa != "" {
			u += "&target_session_attrs=" + tsa
		}
		cfg, err := db.PoolConfig(u)
		if err != nil {
			t.Errorf("target_session_attrs=%q: %v", tsa, err)
			continue
		}
		if cfg.ConnConfig.ValidateConnect == nil {
			t.Errorf("target_session_attrs=%q: no check on connect", tsa)
		}
		if cfg.MaxConns != db.DefaultMaxConns || cfg.ConnConfig.ConnectTimeout != db.ConnectTimeout || cfg.AfterConnect == nil {
			t.Errorf("target_session_attrs=%q: MaxConns %d, ConnectTimeout %s, AfterConnect set %v", tsa,
				cfg.MaxConns, cfg.ConnConfig.ConnectTimeout, cfg.AfterConnect != nil)
		}
	}
	for _, tsa := range []string{"read-only", "standby", "prefer-standby"} {
		_, err := db.PoolConfig(base + "&target_session_attrs=" + tsa)
		var uerr *db.URLError
		if !errors.As(err, &uerr) {
			t.Errorf("target_session_attrs=%s: %v, want a URLError", tsa, err)
		}
	}
	cfg, err := db.PoolConfig(base + "&pool_max_conns=3&connect_timeout=2")
	if err != nil || cfg.MaxConns != 3 || cfg.ConnConfig.ConnectTimeout != 2*time.Second {
		t.Errorf("pool_max_conns=3&connect_timeout=2: %v, MaxConns %d, ConnectTimeout %s", err, cfg.MaxConns, cfg.ConnConfig.ConnectTimeout)
	}
	if _, err := db.PoolConfig("postgres://u@[::1/x"); err == nil {
		t.Error("a malformed URL parsed")
	}
}

// open makes a pool with db.Open on cfg, closed when t ends.
func open(t *testing.T, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	pool, err := db.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestReadOnlyServerRefused: a server whose sessions are read-only (as a
// standby's are) gets no connection of a pool: the connection fails with
// an error db.ReadOnly recognises.
func TestReadOnlyServerRefused(t *testing.T) {
	t.Parallel()
	cfg, err := db.PoolConfig(dbtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	err = open(t, cfg).Ping(t.Context())
	if err == nil || !db.ReadOnly(err) {
		t.Fatalf("Ping on a read-only server: %v, want an error db.ReadOnly recognises", err)
	}
	if db.ReadOnly(errors.New("connection refused")) {
		t.Error("db.ReadOnly recognises any error")
	}
}

// TestReadOnlyConnectionDropped: a connection whose writes are refused as
// read-only (SQLSTATE 25006, a primary demoted while it runs) is closed,
// never used again: the next statement runs on a fresh connection.
func TestReadOnlyConnectionDropped(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg, err := db.PoolConfig(dbtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool := open(t, cfg)
	var pid1 int
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid1); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(ctx, "CREATE TEMP TABLE t (x int)")
	if !db.ReadOnly(err) {
		t.Fatalf("a write on the read-only session: %v, want SQLSTATE 25006", err)
	}
	var pid2 int
	var ro string
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid(), current_setting('transaction_read_only')").Scan(&pid2, &ro); err != nil {
		t.Fatal(err)
	}
	if pid2 == pid1 || ro != "off" {
		t.Errorf("after the refused write: backend %d (was %d), transaction_read_only %s; want a fresh, writable connection", pid2, pid1, ro)
	}
}

// TestDurabilityLocal: without synchronous_standby_names (the test
// server's case) a commit is durable on the primary only.
func TestDurabilityLocal(t *testing.T) {
	t.Parallel()
	srv, err := db.ReadServer(t.Context(), dbtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if srv.ReadOnly || (srv.SynchronousStandbyNames == "" && srv.Durability != db.DurabilityLocal) {
		t.Errorf("ReadServer = %+v, want writable and local durability", srv)
	}
}

// TestWritableHostOfACluster runs a primary with a synchronous standby
// (pg_basebackup through db/pgcluster) and checks, for each way of writing
// DATABASE_URL (either host first, with and without target_session_attrs),
// that the pool is only on the primary and says synchronous_standby; that
// the standby alone is refused as read-only; and that once the primary is
// killed and the standby promoted, the same pool is on it.
func TestWritableHostOfACluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bg := context.WithoutCancel(ctx)
	primary, err := pgcluster.StartTemp(bg, nil, "", pgcluster.Config{BinDir: os.Getenv("GITLEASE_PG_BINDIR"),
		Settings: map[string]string{"synchronous_commit": "on", "synchronous_standby_names": "*"}})
	if err != nil {
		t.Fatalf("this test needs the PostgreSQL server binaries (set GITLEASE_PG_BINDIR): %v", err)
	}
	t.Cleanup(func() { _ = primary.Remove(bg) })
	standby, err := pgcluster.StartTempStandby(bg, nil, "", primary, pgcluster.Config{BinDir: os.Getenv("GITLEASE_PG_BINDIR")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Remove(bg) })
	hostURL := func(tsa string, ports ...int) string {
		u := "postgres://postgres@"
		for i, p := range ports {
			if i > 0 {
				u += ","
			}
			u += fmt.Sprintf("127.0.0.1:%d", p)
		}
		u += "/postgres?sslmode=disable"
		if tsa != "" {
			u += "&target_session_attrs=" + tsa
		}
		return u
	}
	pools := map[string]*pgxpool.Pool{}
	for _, order := range [][]int{{primary.Port(), standby.Port()}, {standby.Port(), primary.Port()}} {
		for _, tsa := range []string{"", "read-write"} {
			u := hostURL(tsa, order...)
			cfg, err := db.PoolConfig(u)
			if err != nil {
				t.Fatal(err)
			}
			pool := open(t, cfg)
			pools[u] = pool
			// Three connections at once, so each one's host is checked.
			var held []*pgxpool.Conn
			for range 3 {
				c, err := pool.Acquire(ctx)
				if err != nil {
					t.Fatalf("%s: acquire: %v", u, err)
				}
				held = append(held, c)
				var port int
				if err := c.QueryRow(ctx, "SELECT inet_server_port()").Scan(&port); err != nil || port != primary.Port() {
					t.Errorf("%s: connected to port %d (%v), want the primary's %d", u, port, err, primary.Port())
				}
				if _, err := c.Exec(ctx, "CREATE TEMP TABLE w (x int)"); err != nil {
					t.Errorf("%s: a write: %v", u, err)
				}
			}
			for _, c := range held {
				c.Release()
			}
			srv, err := db.ReadServer(ctx, pool)
			if err != nil || srv.ReadOnly || srv.Durability != db.DurabilitySynchronousStandby {
				t.Errorf("%s: ReadServer = %+v, %v; want writable with a synchronous standby", u, srv, err)
			}
		}
	}
	cfg, err := db.PoolConfig(hostURL("", standby.Port()))
	if err != nil {
		t.Fatal(err)
	}
	if err := open(t, cfg).Ping(ctx); !db.ReadOnly(err) {
		t.Errorf("a pool on the standby alone: Ping = %v, want an error db.ReadOnly recognises", err)
	}

	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(bg); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	for u, pool := range pools {
		for {
			srv, err := db.ReadServer(ctx, pool)
			if err == nil && !srv.ReadOnly {
				if srv.Durability != db.DurabilityLocal {
					t.Errorf("%s after the promotion: durability %s, want local (the standby has none of its own)", u, srv.Durability)
				}
				break
			}
			if time.Since(promoted) > time.Minute {
				t.Fatalf("%s: no writable server a minute after the promotion: %+v, %v", u, srv, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		var port int
		if err := pool.QueryRow(ctx, "SELECT inet_server_port()").Scan(&port); err != nil || port != standby.Port() {
			t.Errorf("%s after the promotion: port %d, %v; want the promoted standby's %d", u, port, err, standby.Port())
		}
	}
	t.Logf("every pool on the promoted standby %s after the promotion", time.Since(promoted).Round(time.Millisecond))
}

// FuzzPoolConfig: DATABASE_URL is the operator's text. PoolConfig never
// panics on it, and what it refuses it refuses without quoting it (it may
// hold a password); what it takes checks every connection's server.
func FuzzPoolConfig(f *testing.F) {
	for _, s := range []string{
		"postgres://u:secret@a:5432,b:5433/db?sslmode=disable",
		"postgres://u@a,b/db?target_session_attrs=standby",
		"host=a,b port=5432,5433 user=u password=secret target_session_attrs=read-write",
		"postgresql:///db?host=/tmp&pool_max_conns=3",
		"postgres://u@[::1/x", "", "host=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := db.PoolConfig(s)
		if err != nil {
			var uerr *db.URLError
			if !errors.As(err, &uerr) {
				t.Fatalf("PoolConfig(%q): %v, not a URLError", s, err)
			}
			if msg := err.Error(); msg != "not a valid Postgres connection string" && !strings.HasPrefix(msg, "target_session_attrs must be") {
				t.Fatalf("PoolConfig(%q): %q, not one of its fixed problems (it may quote the string)", s, msg)
			}
			return
		}
		if cfg.ConnConfig.ValidateConnect == nil {
			t.Fatalf("PoolConfig(%q) checks no connection", s)
		}
	})
}
