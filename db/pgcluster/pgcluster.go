// Package pgcluster supervises a local PostgreSQL cluster: it finds the
// server binaries, initialises a data directory once, starts the server on
// a port of 127.0.0.1, reuses one that is already running, and stops it;
// for the failover tests it also makes a standby of another cluster
// (pg_basebackup -R), promotes it, and kills a server as a crash would. It
// is the one implementation that `gitlease dev`, the tests' database
// (scripts/with-postgres, through db/pgcluster/withpg) and the chaos tests
// use; docs/configuration.md says how the binaries are found.
//
// PostgreSQL refuses to run as root. When the calling process is root,
// every PostgreSQL program runs as the postgres OS user (through runuser,
// else su), and the data directory, socket directory and log file are given
// to that user, who must also be able to reach them: every parent directory
// must be searchable by others.
//
// A Cluster is not safe for concurrent use, and it does not lock its data
// directory against other processes: a caller that may run twice at once on
// the same directory (two `gitlease dev` in one checkout) holds its own lock
// around Init and Start.
//
// Killing initdb or pg_ctl half-way can leave a broken data directory or an
// unsupervised server. Callers that want a Ctrl-C to interrupt setup should
// therefore pass a context that is not cancelled by it
// (context.WithoutCancel) and check their own between calls; each program
// run is bounded by Config.CommandTimeout.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// DefaultCommandTimeout bounds one initdb or pg_ctl run unless
	// Config.CommandTimeout says otherwise.
	DefaultCommandTimeout = 2 * time.Minute
	// maxSocketPath is the longest unix socket path the kernel accepts
	// (sun_path is 108 bytes including the terminating NUL).
	maxSocketPath = 107
	// startAttempts is how many free ports Start tries when it chooses the
	// port itself: another process may take one between the choice and the
	// server's bind.
	startAttempts = 5
	// pgWaitSeconds is pg_ctl's -t: how long start and stop wait for the
	// server.
	pgWaitSeconds = "60"
)

// ErrNotWritable is returned by New (and StartTemp), wrapped with the data
// directory's path and advice, when the process is root and the postgres OS
// user, who runs the server, cannot write the data directory: usually a
// parent directory it cannot search, such as /root.
var ErrNotWritable = errors.New("PostgreSQL runs as the postgres OS user when the process runs as root, and that user cannot write")

// Config says where a cluster lives and how its server runs.
type Config struct {
	// BinDir is the directory holding initdb and pg_ctl. Empty means
	// FindBinDir's search; commands pass GITLEASE_PG_BINDIR here.
	BinDir string
	// DataDir is the cluster's data directory. Required; New creates it.
	DataDir string
	// LogFile is the server's log. Default: postgres.log beside DataDir.
	LogFile string
	// SocketDir is the directory of the server's unix socket. Default: run
	// beside DataDir. When its path is too long for a unix socket, Start
	// uses a fresh directory under /tmp instead and Stop removes it.
	SocketDir string
	// Password, when set, is the postgres role's password: Init then trusts
	// no local user (peer authentication on the socket, SCRAM-SHA-256 over
	// TCP) and URL carries it. Empty: every local connection is trusted,
	// which only throwaway test clusters should be.
	Password string
	// Throwaway turns durability off for clusters deleted after use: initdb
	// runs with --no-sync, and the server with fsync, synchronous_commit and
	// full_page_writes off. A crash can corrupt such a cluster.
	Throwaway bool
	// MaxConnections is the server's max_connections; 0 keeps PostgreSQL's
	// default (100).
	MaxConnections int
	// CommandTimeout bounds each initdb or pg_ctl run. Default:
	// DefaultCommandTimeout.
	CommandTimeout time.Duration
	// Settings are further server settings (name → value), passed to
	// every start after Throwaway's, which they override: say
	// synchronous_commit=on on a throwaway cluster, or
	// synchronous_standby_names. A standby made by InitStandby does not
	// inherit its primary's.
	Settings map[string]string
}

// Cluster is one PostgreSQL cluster on this machine: its data directory
// and, once started or reused, the server running on it.
type Cluster struct {
	cfg    Config
	logger *slog.Logger

	// asPostgres is set when we are root: PostgreSQL refuses to run as root,
	// so its programs run as the postgres OS user, who owns the data.
	asPostgres bool
	uid, gid   int
	// runuser is the path of runuser, or "" to use su.
	runuser string

	port int
	// started is true while a server this Cluster started runs, which Stop
	// then stops.
	started bool
	// sockDir is the socket directory of the running server: cfg.SocketDir,
	// or tmpSockDir's directory.
	sockDir    string
	tmpSockDir bool
	// tempRoot is the directory StartTemp made, which Remove deletes.
	tempRoot string
}

// New finds the PostgreSQL binaries (see FindBinDir) and prepares cfg's
// directories: it creates DataDir and SocketDir (mode 0700), restricts a
// DataDir others can read, creates LogFile, and, when the process is root,
// gives them to the postgres OS user. It starts nothing. logger may be nil.
//
// It returns ErrNoBinaries when no binaries are found, ErrNotWritable when
// the postgres OS user cannot write DataDir, and an error when DataDir is
// empty, when running as root without a postgres OS user, or when a
// directory cannot be created or given away.
func New(ctx context.Context, logger *slog.Logger, cfg Config) (*Cluster, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("set up postgres cluster: no data directory given")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var err error
	if cfg.BinDir, err = FindBinDir(ctx, cfg.BinDir); err != nil {
		return nil, err
	}
	if cfg.DataDir, err = filepath.Abs(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("resolve data directory: %w", err)
	}
	if cfg.LogFile == "" {
		cfg.LogFile = filepath.Join(filepath.Dir(cfg.DataDir), "postgres.log")
	}
	if cfg.SocketDir == "" {
		cfg.SocketDir = filepath.Join(filepath.Dir(cfg.DataDir), "run")
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = DefaultCommandTimeout
	}
	c := &Cluster{cfg: cfg, logger: logger, uid: -1, gid: -1, sockDir: cfg.SocketDir}
	if os.Geteuid() == 0 {
		if err := c.usePostgresUser(); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{cfg.DataDir, cfg.SocketDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	// PostgreSQL refuses a data directory others can read (a chmod -R or a
	// copy can widen it); it allows u=rwx with at most g=rx.
	if fi, err := os.Stat(cfg.DataDir); err == nil && fi.Mode().Perm()&0o027 != 0 {
		if err := os.Chmod(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("restrict data directory: %w", err)
		}
	}
	// pg_ctl opens the log as the user it runs as.
	lf, err := os.OpenFile(cfg.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("create postgres log: %w", err)
	}
	lf.Close()
	if c.asPostgres {
		if err := chownTree(cfg.DataDir, c.uid, c.gid); err != nil {
			return nil, fmt.Errorf("give the data directory to the postgres user: %w", err)
		}
		for _, p := range []string{cfg.SocketDir, cfg.LogFile} {
			if err := os.Chown(p, c.uid, c.gid); err != nil {
				return nil, fmt.Errorf("give %s to the postgres user: %w", p, err)
			}
		}
		// Every parent must be searchable by postgres, which a home
		// directory such as /root usually is not; say so plainly instead of
		// letting initdb fail with "permission denied" half-way.
		if err := c.command(ctx, "test", "-w", cfg.DataDir).Run(); err != nil {
			return nil, fmt.Errorf("%w %s: make its parent directories searchable by others (chmod o+x), or put the cluster elsewhere", ErrNotWritable, cfg.DataDir)
		}
	}
	return c, nil
}

// usePostgresUser makes the cluster's programs run as the postgres OS user.
func (c *Cluster) usePostgresUser() error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root, PostgreSQL must run as the postgres OS user, which was not found: %w", err)
	}
	if c.uid, err = strconv.Atoi(u.Uid); err != nil {
		return fmt.Errorf("look up postgres user: uid %q: %w", u.Uid, err)
	}
	if c.gid, err = strconv.Atoi(u.Gid); err != nil {
		return fmt.Errorf("look up postgres user: gid %q: %w", u.Gid, err)
	}
	if p, err := exec.LookPath("runuser"); err == nil {
		c.runuser = p
	} else if _, err := exec.LookPath("su"); err != nil {
		return errors.New("running as root, PostgreSQL must run as the postgres OS user, and neither runuser nor su is on PATH")
	}
	c.asPostgres = true
	return nil
}

// DataDir is the cluster's data directory, as an absolute path.
func (c *Cluster) DataDir() string { return c.cfg.DataDir }

// LogFile is the server's log file.
func (c *Cluster) LogFile() string { return c.cfg.LogFile }

// SocketDir is the directory of the unix socket of the server this Cluster
// started (Config.SocketDir, or the short one Start made instead).
func (c *Cluster) SocketDir() string { return c.sockDir }

// Port is the TCP port on 127.0.0.1 of the server Start started or Reuse
// found; after Stop, the port it had. 0 before either.
func (c *Cluster) Port() int { return c.port }

// Started reports whether a server this Cluster started is running, which
// Stop would stop. A server found by Reuse does not count.
func (c *Cluster) Started() bool { return c.started }

// URL is the connection URL of database db on the server, over TCP as the
// postgres user (trust authentication), without TLS.
func (c *Cluster) URL(db string) string {
	role := url.User("postgres")
	if c.cfg.Password != "" {
		role = url.UserPassword("postgres", c.cfg.Password)
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     role,
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Init creates the cluster with initdb (superuser postgres, password
// authentication when Config.Password is set, else trust; UTF8, locale C),
// once: a data directory holding
// PG_VERSION is already one, and Init then does nothing. It returns
// initdb's output in the error when initdb fails.
func (c *Cluster) Init(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.cfg.DataDir, "PG_VERSION")); err == nil {
		return nil
	}
	c.logger.Info("creating postgres cluster", "data", c.cfg.DataDir, "bindir", c.cfg.BinDir)
	// --locale=C: with -E UTF8, a non-UTF-8 locale in the environment would
	// make initdb refuse; these clusters do not need a language's collation.
	args := []string{"-D", c.cfg.DataDir, "-U", "postgres", "-E", "UTF8", "--locale=C"}
	if c.cfg.Throwaway {
		args = append(args, "--no-sync")
	}
	if c.cfg.Password == "" {
		return c.run(ctx, "initdb", "initdb", append(args, "--auth=trust")...)
	}
	// The password reaches initdb in a file only the server's user reads,
	// never on a command line.
	pwfile := filepath.Join(c.sockDir, "initdb.pw")
	if err := os.WriteFile(pwfile, []byte(c.cfg.Password+"\n"), 0o600); err != nil {
		return fmt.Errorf("write the initdb password file: %w", err)
	}
	defer os.Remove(pwfile)
	if c.asPostgres {
		if err := os.Chown(pwfile, c.uid, c.gid); err != nil {
			return fmt.Errorf("give the initdb password file to the postgres user: %w", err)
		}
	}
	return c.run(ctx, "initdb", "initdb", append(args, "--auth-local=peer", "--auth-host=scram-sha-256", "--pwfile="+pwfile)...)
}

// Running reports whether a server is running on the data directory,
// started by anyone. It returns an error when pg_ctl cannot tell (no
// initialised data directory, say).
func (c *Cluster) Running(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CommandTimeout)
	defer cancel()
	out, err := c.pgCommand(ctx, "pg_ctl", "status", "-D", c.cfg.DataDir).CombinedOutput()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exitErr) && exitErr.ExitCode() == 3:
		// pg_ctl's documented "not running".
		return false, nil
	}
	return false, fmt.Errorf("check whether postgres runs on %s: %w: %s", c.cfg.DataDir, err, oneLine(string(out)))
}

// Reuse adopts the server already running on the data directory: it reads
// its port from postmaster.pid (the fourth line) and checks the server
// answers at 127.0.0.1 there. Stop leaves an adopted server running. It
// returns an error when no server runs or it does not answer.
func (c *Cluster) Reuse(ctx context.Context) error {
	b, err := os.ReadFile(filepath.Join(c.cfg.DataDir, "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("read running postgres's port: %w", err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return fmt.Errorf("read running postgres's port: postmaster.pid has %d lines", len(lines))
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil {
		return fmt.Errorf("read running postgres's port: %w", err)
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("a postgres is running on %s but does not answer at 127.0.0.1:%d (stop it with pg_ctl stop -D %s): %w", c.cfg.DataDir, port, c.cfg.DataDir, err)
	}
	conn.Close()
	c.port = port
	return nil
}

// Start starts the server on 127.0.0.1:port and the socket directory, and
// waits until it accepts connections. Port 0 means a free port of Start's
// choosing (see Port), tried again with another when something else takes
// it first. If a start fails or times out, Start makes sure no server it
// started is left behind and returns an error quoting the log lines of
// this start.
func (c *Cluster) Start(ctx context.Context, port int) error {
	if port != 0 {
		return c.startOn(ctx, port)
	}
	var err error
	for range startAttempts {
		if port, err = freePort(); err != nil {
			return fmt.Errorf("choose a port for postgres: %w", err)
		}
		if err = c.startOn(ctx, port); err == nil || !errors.Is(err, errPortTaken) {
			return err
		}
	}
	return err
}

// errPortTaken marks a start that failed because the port was taken.
var errPortTaken = errors.New("port taken")

// startOn is one start attempt on port.
func (c *Cluster) startOn(ctx context.Context, port int) error {
	if err := c.useSocketDir(); err != nil {
		return err
	}
	// pg_ctl hands -o to a shell, hence the quoting.
	opts := []string{"-c listen_addresses=127.0.0.1", "-p " + strconv.Itoa(port), "-k " + shellQuote(c.sockDir)}
	if c.cfg.Throwaway {
		opts = append(opts, "-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off")
	}
	if c.cfg.MaxConnections > 0 {
		opts = append(opts, "-c max_connections="+strconv.Itoa(c.cfg.MaxConnections))
	}
	for _, name := range slices.Sorted(maps.Keys(c.cfg.Settings)) {
		opts = append(opts, "-c "+shellQuote(name+"="+c.cfg.Settings[name]))
	}
	// Only what this start writes to the log is worth quoting on failure.
	var logStart int64
	if fi, err := os.Stat(c.cfg.LogFile); err == nil {
		logStart = fi.Size()
	}
	err := c.run(ctx, "start postgres", "pg_ctl", "start", "-w", "-t", pgWaitSeconds,
		"-D", c.cfg.DataDir, "-l", c.cfg.LogFile, "-o", strings.Join(opts, " "))
	if err == nil {
		c.port, c.started = port, true
		return nil
	}
	// A failed or timed-out start may still have left a server behind;
	// make sure it is gone before reporting.
	if running, _ := c.Running(ctx); running {
		c.port, c.started = port, true
		if serr := c.Stop(ctx); serr != nil {
			c.logger.Error("stop postgres after failed start", "err", serr)
		}
	}
	c.dropTmpSocketDir()
	tail := logTail(c.cfg.LogFile, logStart, 5)
	if tail == "" {
		return err
	}
	err = fmt.Errorf("%w; %s says: %s", err, c.cfg.LogFile, tail)
	if strings.Contains(tail, "already in use") {
		err = fmt.Errorf("%w (%w)", err, errPortTaken)
	}
	return err
}

// useSocketDir picks the socket directory for a start: Config.SocketDir,
// or a fresh directory under /tmp when a socket path in it would be longer
// than a unix socket path may be.
func (c *Cluster) useSocketDir() error {
	c.sockDir, c.tmpSockDir = c.cfg.SocketDir, false
	// 10 digits is more than any port takes: a conservative check that does
	// not depend on which port is used this time.
	if len(c.sockDir)+len("/.s.PGSQL.")+10 <= maxSocketPath {
		return nil
	}
	d, err := os.MkdirTemp("/tmp", "gitlease-")
	if err != nil {
		return fmt.Errorf("create short socket directory: %w", err)
	}
	if c.asPostgres {
		if err := os.Chown(d, c.uid, c.gid); err != nil {
			os.Remove(d)
			return fmt.Errorf("give %s to the postgres user: %w", d, err)
		}
	}
	c.sockDir, c.tmpSockDir = d, true
	return nil
}

// dropTmpSocketDir removes the short socket directory useSocketDir made.
func (c *Cluster) dropTmpSocketDir() {
	if c.tmpSockDir {
		os.RemoveAll(c.sockDir)
		c.sockDir, c.tmpSockDir = c.cfg.SocketDir, false
	}
}

// Stop stops the server this Cluster started (fast shutdown: sessions are
// disconnected, data is flushed) and waits until the postmaster has exited;
// it does nothing when Started is false (never started, already stopped,
// or adopted by Reuse). If pg_ctl fails, the postmaster gets SIGQUIT, so
// that no server outlives the caller; the error says so. Port keeps its
// value, so Start(ctx, c.Port()) brings the server back where it was.
func (c *Cluster) Stop(ctx context.Context) error {
	if !c.started {
		return nil
	}
	defer c.dropTmpSocketDir()
	pid := PostmasterPID(c.cfg.DataDir)
	err := c.run(ctx, "stop postgres", "pg_ctl", "stop", "-w", "-t", pgWaitSeconds, "-m", "fast", "-D", c.cfg.DataDir)
	if err == nil {
		// pg_ctl returns once postmaster.pid is gone, which the postmaster
		// removes just before it exits: wait for the exit itself, so that
		// no server process outlives the caller.
		if pid > 0 && !waitGone(pid, 10*time.Second) {
			return fmt.Errorf("stop postgres: postmaster %d still running after pg_ctl stop", pid)
		}
		c.started = false
		return nil
	}
	if pid <= 0 {
		return err
	}
	if kerr := syscall.Kill(pid, syscall.SIGQUIT); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
		return fmt.Errorf("%w; then SIGQUIT to postmaster %d: %v", err, pid, kerr)
	}
	if !waitGone(pid, 30*time.Second) {
		return fmt.Errorf("%w; postmaster %d still running after SIGQUIT", err, pid)
	}
	c.started = false
	return nil
}
