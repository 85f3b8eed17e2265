// Package dbtest gives tests their own PostgreSQL database. It is imported
// only by tests.
//
// Every call of New or URL clones a fresh database from a template that has
// all migrations applied, so a test gets a migrated schema in one CREATE
// DATABASE (tens of milliseconds) instead of running the migrations. EmptyURL
// gives a database with no schema at all, for migration tests. Databases are
// dropped when the test ends. The approach follows peterldowns/pgtestdb and
// riverqueue/river's test helpers.
//
// The server comes from DATABASE_URL, which `make test` (scripts/with-postgres)
// provides; without one, tests fail rather than skip.
//
// The template is named after a hash of the embedded migrations, so changing
// a migration makes a new template and test runs from different checkouts
// sharing one server never see each other's schema. Several test processes
// (one per package) run at once: the template is built under a Postgres
// advisory lock, under a temporary name that is renamed only once migrations
// have succeeded, so a process killed mid-build leaves nothing that passes for
// a finished template; the next run drops the leftover and rebuilds.
//
// A test process killed before its cleanups run (Ctrl-C, a -timeout panic)
// would leave its databases behind. So each process holds an advisory lock
// on an owner token for its lifetime and puts the token in the names of the
// databases it creates; the next process to start drops the databases of
// tokens nobody holds any more.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/db"
)

const (
	// templatePrefix and testPrefix name the databases this package creates.
	templatePrefix = "gitlease_tpl_"
	testPrefix     = "gitlease_test_"
	// buildingSuffix marks a template whose migrations have not finished.
	buildingSuffix = "_building"

	// templateLockKey is the pg_advisory_lock key serialising template
	// builds and the collection of abandoned databases across test
	// processes ("gitlease" in ASCII).
	templateLockKey int64 = 0x6769746c65617365
	// ownerLockClass is the first key of the two-key advisory locks on
	// owner tokens ("glts"); the second is the token.
	ownerLockClass int32 = 0x676c7473

	// setupTimeout bounds building the template, including waiting for
	// another process that is building it.
	setupTimeout = 3 * time.Minute
	// opTimeout bounds one CREATE or DROP DATABASE.
	opTimeout = 30 * time.Second
	// closeTimeout is how long cleanup waits for a test's pool to close.
	closeTimeout = 10 * time.Second
)

// server is the per-process knowledge about the test server: where it is and
// which migrated template to clone.
type server struct {
	once     sync.Once
	err      error
	rawURL   string          // DATABASE_URL, may hold a password: never print it
	cfg      *pgx.ConnConfig // parsed DATABASE_URL, for admin connections
	template string          // name of the migrated template database
	where    string          // host:port for messages
	poolCfg  *pgxpool.Config // parsed DATABASE_URL, copied for each test pool

	// owner holds the advisory lock on token, this process's owner token,
	// until the process exits. A pgx.Conn runs no goroutines while idle.
	owner *pgx.Conn
	token string // 8 hex digits, in the name of every database created
}

// shared is the one piece of package state: the template is built once per
// test process. Package-level variables are avoided elsewhere in gitlease;
// this test-only package is the documented exception, because New is called
// from independent tests that have nothing else to share it through.
var shared server

// New returns a pool on a fresh database with all migrations applied. The
// database is dropped, and the pool closed, when tb ends.
func New(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	s := setup(tb)
	name := s.create(tb, s.template)
	cfg := s.poolCfg.Copy()
	cfg.ConnConfig.Database = name
	cfg.MaxConns = 20
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	pool, err := db.Open(ctx, cfg)
	if err != nil {
		tb.Fatalf("dbtest: open pool on %s: %v", name, err)
	}
	// Registered after create's drop, so it runs first: close, then drop.
	tb.Cleanup(func() { closePool(tb, pool, name) })
	return pool
}

// URL returns a connection URL for a fresh database with all migrations
// applied, for tests that hand a database to another process. The database is
// dropped when tb ends; anything still connected to it is disconnected.
func URL(tb testing.TB) string {
	tb.Helper()
	s := setup(tb)
	return s.urlFor(s.create(tb, s.template))
}

// EmptyURL returns a connection URL for a fresh, empty database: no
// migrations, not even goose's version table. It is dropped when tb ends.
func EmptyURL(tb testing.TB) string {
	tb.Helper()
	s := setup(tb)
	return s.urlFor(s.create(tb, "template0"))
}

// setup connects to DATABASE_URL and makes sure the template exists, once
// per process. Every caller sees the same outcome.
func setup(tb testing.TB) *server {
	tb.Helper()
	s := &shared
	s.once.Do(func() { s.err = s.init() })
	if s.err != nil {
		tb.Fatal(s.err.Error())
	}
	return s
}

func (s *server) init() error {
	s.rawURL = os.Getenv("DATABASE_URL")
	if s.rawURL == "" {
		return errors.New("dbtest: no PostgreSQL reachable at DATABASE_URL (it is not set); " +
			"run tests with `make test`, which provides one")
	}
	cfg, err := pgx.ParseConfig(s.rawURL)
	if err != nil {
		// Parse errors may quote the URL; do not repeat them.
		return errors.New("dbtest: no PostgreSQL reachable at DATABASE_URL (it does not parse); " +
			"run tests with `make test`, which provides one")
	}
	s.cfg = cfg
	s.where = fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	// As serve's pools: only a server that takes writes, AfterConnect.
	if s.poolCfg, err = db.PoolConfig(s.rawURL); err != nil {
		return fmt.Errorf("dbtest: parse DATABASE_URL as a pool config: %w", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	conn, err := s.connectAdmin(ctx)
	if err != nil {
		return fmt.Errorf("dbtest: no PostgreSQL reachable at DATABASE_URL (%s); "+
			"run tests with `make test`, which provides one (%s)", s.where, oneLine(err))
	}
	defer conn.Close(context.Background())

	hash, err := migrationsHash()
	if err != nil {
		return fmt.Errorf("dbtest: hash migrations: %w", err)
	}
	s.template = templatePrefix + hash
	if err := s.takeToken(ctx); err != nil {
		return fmt.Errorf("dbtest: take an owner token: %w", err)
	}
	if err := s.ensureTemplate(ctx, conn); err != nil {
		return fmt.Errorf("dbtest: build template database %s: %w", s.template, err)
	}
	return nil
}

// takeToken opens the owner connection and locks a fresh owner token on it.
func (s *server) takeToken(ctx context.Context) error {
	conn, err := s.connectAdmin(ctx)
	if err != nil {
		return err
	}
	for range 10 {
		token := randomHex(4)
		var locked bool
		err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", ownerLockClass, tokenKey(token)).Scan(&locked)
		if err != nil {
			conn.Close(context.Background())
			return err
		}
		if locked {
			s.owner, s.token = conn, token
			return nil
		}
	}
	conn.Close(context.Background())
	return errors.New("every token tried is locked")
}

// collectAbandoned drops the test databases of processes that are gone: those
// whose owner token no session holds. The caller holds templateLockKey.
func (s *server) collectAbandoned(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", testPrefix)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, name := range names {
		token, _, ok := strings.Cut(strings.TrimPrefix(name, testPrefix), "_")
		if !ok || len(token) != 8 || token == s.token {
			continue
		}
		if _, err := hex.DecodeString(token); err != nil {
			continue
		}
		var free bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", ownerLockClass, tokenKey(token)).Scan(&free); err != nil {
			return err
		}
		if !free {
			continue // its process is alive
		}
		// Holding the token while dropping keeps a new process from taking
		// it in between.
		_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)")
		if _, uerr := conn.Exec(ctx, "SELECT pg_advisory_unlock($1, $2)", ownerLockClass, tokenKey(token)); err == nil {
			err = uerr
		}
		if err != nil {
			return fmt.Errorf("drop %s: %w", name, err)
		}
	}
	return nil
}

// ensureTemplate creates the migrated template unless another process (or an
// earlier run) already has. It holds a session advisory lock throughout, so at
// most one process builds at a time and the others wait and then find it.
// Under the same lock it first drops the databases of dead processes.
func (s *server) ensureTemplate(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return fmt.Errorf("take template lock: %w", err)
	}
	// Closing the connection releases the lock too; this is for tidiness.
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", templateLockKey)

	if err := s.collectAbandoned(ctx, conn); err != nil {
		return fmt.Errorf("drop databases of finished test processes: %w", err)
	}

	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)",
		s.template).Scan(&exists); err != nil {
		return fmt.Errorf("look for template: %w", err)
	}
	if exists {
		return nil
	}

	// A leftover of a build that was killed part way: start again.
	building := s.template + buildingSuffix
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(building)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop unfinished template: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(building)+" TEMPLATE template0"); err != nil {
		return fmt.Errorf("create: %w", err)
	}

	cfg := s.poolCfg.Copy()
	cfg.ConnConfig.Database = building
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	_, err = db.Migrate(ctx, pool)
	pool.Close() // a database cannot be renamed or cloned while connected
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}

	// The rename is what marks the template finished.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(building)+" RENAME TO "+ident(s.template)); err != nil {
		return fmt.Errorf("rename finished template: %w", err)
	}
	return nil
}

// create makes a database named testPrefix + owner token + random hex as a
// copy of tpl and registers its drop with tb.Cleanup.
func (s *server) create(tb testing.TB, tpl string) string {
	tb.Helper()
	name := testPrefix + s.token + "_" + randomHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := s.connectAdmin(ctx)
	if err != nil {
		tb.Fatalf("dbtest: connect to %s: %s", s.where, oneLine(err))
	}
	defer conn.Close(context.Background())

	stmt := "CREATE DATABASE " + ident(name) + " TEMPLATE " + ident(tpl)
	for attempt := 1; ; attempt++ {
		_, err = conn.Exec(ctx, stmt)
		// 55006 object_in_use: "source database ... is being accessed by
		// other users". Nothing of ours connects to a template, but someone
		// inspecting it with psql would; wait a little for them.
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || attempt == 10 {
			break
		}
		time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
	}
	if err != nil {
		tb.Fatalf("dbtest: create database %s from %s: %v", name, tpl, err)
	}
	tb.Cleanup(func() { s.drop(tb, name) })
	return name
}

// drop removes a test database, disconnecting whatever is still connected.
func (s *server) drop(tb testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := s.connectAdmin(ctx)
	if err != nil {
		tb.Errorf("dbtest: drop database %s: connect: %s", name, oneLine(err))
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
		tb.Errorf("dbtest: drop database %s: %v", name, err)
	}
}

// closePool closes a test's pool. pgxpool.Close waits for every acquired
// connection to be released, so a test that leaks one (a Conn never
// Released, Rows never closed) would hang here; report it instead, and leave
// the connection to DROP DATABASE ... WITH (FORCE).
func closePool(tb testing.TB, pool *pgxpool.Pool, name string) {
	done := make(chan struct{})
	go func() {
		pool.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeTimeout):
		tb.Errorf("dbtest: pool on %s did not close within %s: the test still holds an acquired "+
			"connection (a missing Release, Rows.Close or tx Rollback?)", name, closeTimeout)
	}
}

// connectAdmin opens a connection to the DATABASE_URL database, from which
// databases are created and dropped.
func (s *server) connectAdmin(ctx context.Context) (*pgx.Conn, error) {
	return pgx.ConnectConfig(ctx, s.cfg.Copy())
}

// urlFor returns DATABASE_URL with the database changed to name.
func (s *server) urlFor(name string) string {
	if u, err := url.Parse(s.rawURL); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		u.RawPath = ""
		q := u.Query()
		if q.Has("dbname") { // libpq lets the query string override the path
			q.Set("dbname", name)
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	// keyword=value form: a later setting overrides an earlier one.
	return s.rawURL + " dbname=" + name
}

// migrationsHash is the first 12 hex digits of a SHA-256 over the embedded
// migration files' names and contents.
func migrationsHash() (string, error) {
	h := sha256.New()
	fsys := db.Migrations()
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		// Length-prefixed, so no two file sets hash the same input.
		fmt.Fprintf(h, "%d:%s\n%d:", len(path), path, len(data))
		h.Write(data)
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// ident quotes a database name for SQL. Names here are only ever fixed
// prefixes plus hex this package generated.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// tokenKey is the second advisory lock key for an owner token.
func tokenKey(token string) int32 {
	v, _ := strconv.ParseUint(token, 16, 32)
	return int32(uint32(v))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// oneLine flattens an error message for a one-line report.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
