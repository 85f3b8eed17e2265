package pgcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// testBinDir is what the tests pass as Config.BinDir: GITLEASE_PG_BINDIR,
// as the commands do.
func testBinDir() string { return os.Getenv("GITLEASE_PG_BINDIR") }

// clusterParent is a fresh directory for a test's cluster. It is
// t.TempDir(), except as root: PostgreSQL then runs as the postgres OS
// user, who cannot search t.TempDir's 0700 parents, so the test uses a
// world-searchable directory under /tmp instead and logs where.
func clusterParent(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("/tmp", "pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("running as root: the cluster lives in %s (under /tmp, so the postgres OS user can reach it), not in t.TempDir()", dir)
	return dir
}

// ping connects to url and runs SELECT 1.
func ping(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	defer conn.Close(ctx)
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 on %s: %d, %v", url, one, err)
	}
}

// assertGone fails the test if process pid still runs.
func assertGone(t *testing.T, pid int) {
	t.Helper()
	if pid > 0 && !waitGone(pid, 5*time.Second) {
		syscall.Kill(pid, syscall.SIGQUIT)
		t.Fatalf("postmaster %d still running", pid)
	}
}

func TestFindBinDir(t *testing.T) {
	ctx := context.Background()
	dir, err := FindBinDir(ctx, "")
	if err != nil {
		t.Fatalf("FindBinDir: %v (these tests need the PostgreSQL server binaries; set GITLEASE_PG_BINDIR)", err)
	}
	if !hasServer(dir) {
		t.Fatalf("FindBinDir = %s, which lacks initdb or pg_ctl", dir)
	}
	if got, err := FindBinDir(ctx, dir); err != nil || got != dir {
		t.Errorf("FindBinDir(override %s) = %q, %v; want the override", dir, got, err)
	}
	empty := t.TempDir()
	if _, err := FindBinDir(ctx, empty); err == nil || !strings.Contains(err.Error(), empty) {
		t.Errorf("FindBinDir(override without binaries) = %v, want an error naming %s", err, empty)
	}
}

func TestNewestFirst(t *testing.T) {
	in := []string{
		"/usr/lib/postgresql/9.6/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/beta/bin",
		"/usr/lib/postgresql/10/bin", "/usr/lib/postgresql/15/bin",
	}
	want := []string{
		"/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/10/bin",
		"/usr/lib/postgresql/9.6/bin", "/usr/lib/postgresql/beta/bin",
	}
	if got := newestFirst(in); !slices.Equal(got, want) {
		t.Errorf("newestFirst = %v, want %v", got, want)
	}
}

// TestLifecycle takes one cluster through everything dev does with it:
// init (twice), start, connect, create a database, reuse from a second
// Cluster, stop, start again on the same port, stop.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	parent := clusterParent(t)
	// A socket directory whose socket path would be too long for the
	// kernel: Start must use a short one under /tmp instead.
	longSock := filepath.Join(parent, strings.Repeat("s", 110))
	cfg := Config{BinDir: testBinDir(), DataDir: filepath.Join(parent, "pgdata"), SocketDir: longSock, Throwaway: true}
	c, err := New(ctx, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	if c.LogFile() != filepath.Join(parent, "postgres.log") {
		t.Errorf("LogFile = %s, want postgres.log beside the data directory", c.LogFile())
	}
	for range 2 {
		if err := c.Init(ctx); err != nil {
			t.Fatalf("Init: %v", err)
		}
	}
	if running, err := c.Running(ctx); err != nil || running {
		t.Fatalf("Running before Start = %v, %v; want false", running, err)
	}
	if err := c.Start(ctx, 0); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if !c.Started() || c.Port() == 0 {
		t.Fatalf("after Start: Started %v, Port %d", c.Started(), c.Port())
	}
	sock := c.SocketDir()
	if sock == longSock || !strings.HasPrefix(sock, "/tmp/") {
		t.Errorf("SocketDir = %s, want a short directory under /tmp", sock)
	}
	if _, err := os.Stat(filepath.Join(sock, ".s.PGSQL."+strconv.Itoa(c.Port()))); err != nil {
		t.Errorf("no unix socket in %s: %v", sock, err)
	}
	if running, err := c.Running(ctx); err != nil || !running {
		t.Fatalf("Running after Start = %v, %v; want true", running, err)
	}
	ping(t, c.URL("postgres"))
	for range 2 {
		if err := c.EnsureDatabase(ctx, "gitlease"); err != nil {
			t.Fatalf("EnsureDatabase: %v", err)
		}
	}
	ping(t, c.URL("gitlease"))

	// A second Cluster on the same directory adopts the running server and
	// does not stop it.
	other, err := New(ctx, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Reuse(ctx); err != nil {
		t.Fatalf("Reuse: %v", err)
	}
	if other.Port() != c.Port() || other.Started() {
		t.Errorf("Reuse: Port %d, Started %v; want %d, false", other.Port(), other.Started(), c.Port())
	}
	if err := other.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	ping(t, other.URL("postgres"))

	pid := PostmasterPID(c.DataDir())
	if pid == 0 {
		t.Fatal("no postmaster.pid while running")
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertGone(t, pid)
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("short socket directory %s left after Stop: %v", sock, err)
	}
	if running, err := c.Running(ctx); err != nil || running {
		t.Fatalf("Running after Stop = %v, %v; want false", running, err)
	}
	if err := other.Reuse(ctx); err == nil {
		t.Error("Reuse with no server running: no error")
	}

	// Back on the same port, as the chaos tests do after an outage.
	port := c.Port()
	if err := c.Start(ctx, port); err != nil {
		t.Fatalf("Start again: %v", err)
	}
	if c.Port() != port {
		t.Errorf("Start(%d) runs on %d", port, c.Port())
	}
	ping(t, c.URL("gitlease"))
	pid = PostmasterPID(c.DataDir())
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertGone(t, pid)
}

func TestStartTemp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := StartTemp(ctx, nil, "", Config{BinDir: testBinDir(), MaxConnections: 50})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Remove(context.Background()) })
	t.Logf("throwaway cluster in %s", c.Dir())
	ping(t, c.URL("postgres"))
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var fsync, maxConns string
	err = conn.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('max_connections')").Scan(&fsync, &maxConns)
	conn.Close(ctx)
	if err != nil || fsync != "off" || maxConns != "50" {
		t.Errorf("fsync, max_connections = %q, %q (%v); want off, 50", fsync, maxConns, err)
	}
	pid := PostmasterPID(c.DataDir())
	if err := c.Remove(ctx); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	assertGone(t, pid)
	if _, err := os.Stat(c.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left after Remove: %v", c.Dir(), err)
	}
}

// TestNewUnreachableAsRoot checks that, as root, a data directory the
// postgres OS user cannot reach is refused up front with advice, not
// half-way through initdb.
func TestNewUnreachableAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root process runs PostgreSQL as another user")
	}
	// t.TempDir's parents are 0700 root: postgres cannot search them.
	_, err := New(context.Background(), nil, Config{BinDir: testBinDir(), DataDir: filepath.Join(t.TempDir(), "pgdata")})
	if !errors.Is(err, ErrNotWritable) {
		t.Fatalf("New in t.TempDir as root = %v, want ErrNotWritable", err)
	}
}
