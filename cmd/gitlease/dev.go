package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gitlease/gitlease/app/github"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gitlease/gitlease/app"
)

const (
	// devDefaultDir is the state directory dev uses unless --dir says
	// otherwise, relative to the working directory.
	devDefaultDir = ".gitlease"
	// devDatabase is the database dev creates in its cluster and serves
	// from, so the cluster's own postgres database stays clean.
	devDatabase = "gitlease"
	// pgCommandTimeout bounds one initdb / pg_ctl invocation.
	pgCommandTimeout = 2 * time.Minute
	// maxSocketPath is the longest unix socket path the kernel accepts
	// (sun_path is 108 bytes including the terminating NUL).
	maxSocketPath = 107
)

// devState is what dev remembers across runs in <dir>/dev.json: the port
// of its PostgreSQL and the credentials a developer pasted elsewhere (a
// webhook configuration, a worker's environment), which must not change
// under them at every restart.
type devState struct {
	PostgresPort  int    `json:"postgres_port"`
	WebhookSecret string `json:"webhook_secret"`
	RPCToken      string `json:"rpc_token"`
	// PostgresPassword is the cluster's postgres password: clusters dev
	// creates trust no local user (peer on the socket, SCRAM over TCP).
	PostgresPassword string `json:"postgres_password"`
}

// runDev is `gitlease dev`: it starts (or reuses) a local PostgreSQL under
// the state directory, creates the gitlease database, then serves like
// `serve` until ctx ends, printing what a developer needs to talk to it.
// A PostgreSQL it started is stopped before it returns, whatever the
// reason; one that was already running is left running.
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	dir, rest, err := splitDirFlag(args)
	if err != nil {
		return err
	}
	cfg, err := loadConfig("dev", rest, true, stderr)
	if errors.Is(err, errHelp) {
		fmt.Fprintf(stderr, "  -dir string\n    \tstate directory: PostgreSQL data, logs, dev.json (default %q)\n", devDefaultDir)
	}
	if err != nil {
		return err
	}
	if os.Getenv("DATABASE_URL") != "" {
		logger.Info("dev ignores DATABASE_URL and uses its own PostgreSQL", "dir", dir)
	}

	stateDir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("resolve state directory %s: %w", dir, err)
	}
	// 0755, not 0700: when we run as root, the postgres OS user must be able
	// to reach the data directory inside it. Secrets inside are 0600.
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}

	pg, state, err := setUpDevPostgres(ctx, stateDir, logger)
	if err != nil {
		return err
	}
	if pg.started {
		defer func() {
			// ctx is usually cancelled by now (Ctrl-C): the stop must still run.
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pgCommandTimeout)
			defer cancel()
			if err := pg.stop(stopCtx); err != nil {
				logger.Error("stop postgres", "err", err, "log", pg.logFile)
				return
			}
			logger.Info("postgres stopped", "data", pg.dataDir)
		}()
	}
	if ctx.Err() != nil {
		// Interrupted while PostgreSQL was coming up: a clean exit.
		return nil
	}

	cfg.DatabaseURL = pg.url(devDatabase)
	// Credentials the user set explicitly (env or flag) win over ours.
	if len(cfg.WebhookSecrets) == 0 {
		cfg.WebhookSecrets = []app.Secret{app.Secret(state.WebhookSecret)}
	}
	if cfg.RPCToken == "" {
		cfg.RPCToken = app.Secret(state.RPCToken)
	}
	dryRun := !hasGitHubCredentials(cfg)
	ready := func(addr string) {
		printDevBanner(stdout, addr, string(cfg.WebhookSecrets[0]), string(cfg.RPCToken), pg, dryRun)
	}
	if err := serve(ctx, cfg, logger, ready, githubDryRun); err != nil {
		return err
	}
	return nil
}

// githubFallback is what serve does about GitHub when no App credentials
// are configured.
type githubFallback int

const (
	// githubOutboxOnly (serve): no GitHub calls; writes wait in the outbox,
	// visible and not lost, until credentials are configured.
	githubOutboxOnly githubFallback = iota
	// githubDryRun (dev): the dry-run recorder stands in for GitHub, so the
	// whole flow runs locally and each write is logged instead of sent.
	githubDryRun
)

// hasGitHubCredentials reports whether any GitHub App credential is set.
// A partial set still counts: githubFromConfig then names what is missing,
// rather than dev quietly falling back to the dry run.
func hasGitHubCredentials(cfg config) bool {
	return cfg.AppID != 0 || cfg.PrivateKey != "" || cfg.PrivateKeyFile != ""
}

// githubInstallations is serve's GitHub client factory: the App's own when
// credentials are configured; else, with githubDryRun, one talking to a
// fresh dry-run recorder (through transport, so its calls are counted like
// real ones); else nil.
func githubInstallations(cfg config, fallback githubFallback, transport func(http.RoundTripper) http.RoundTripper, logger *slog.Logger) (*github.Installations, error) {
	if fallback != githubDryRun || hasGitHubCredentials(cfg) {
		return githubFromConfig(cfg, transport(nil), logger)
	}
	// The dry run moves onto the one fake GitHub (app/githubtest) in the next step.
	return githubFromConfig(cfg, transport(nil), logger)
}

// setUpDevPostgres brings the state directory's PostgreSQL to the point
// where the gitlease database answers on 127.0.0.1, and returns it with
// the remembered state. It holds an exclusive lock on the state directory
// meanwhile so two dev processes started together do not both initdb or
// start the same cluster. If it started PostgreSQL and then fails, it
// stops it again before returning.
func setUpDevPostgres(ctx context.Context, stateDir string, logger *slog.Logger) (_ *localPG, _ devState, err error) {
	unlock, err := lockFile(filepath.Join(stateDir, "dev.lock"))
	if err != nil {
		return nil, devState{}, err
	}
	defer unlock()

	statePath := filepath.Join(stateDir, "dev.json")
	state, err := loadDevState(statePath)
	if err != nil {
		return nil, devState{}, err
	}

	pg, err := newLocalPG(stateDir, logger)
	if err != nil {
		return nil, state, err
	}
	// PostgreSQL commands are not tied to ctx: killing initdb or pg_ctl
	// half-way leaves a broken data directory or an unsupervised server.
	// Each is bounded by pgCommandTimeout instead, and ctx is checked
	// between steps.
	pgCtx := context.WithoutCancel(ctx)
	pg.password = state.PostgresPassword
	if err := pg.initdb(pgCtx); err != nil {
		return nil, state, err
	}
	running, err := pg.running(pgCtx)
	if err != nil {
		return nil, state, err
	}
	if running {
		if pg.port, err = pg.runningPort(); err != nil {
			return nil, state, err
		}
		logger.Info("reusing running postgres", "data", pg.dataDir, "port", pg.port)
	} else {
		if state.PostgresPort == 0 || !portFree(state.PostgresPort) {
			if state.PostgresPort != 0 {
				logger.Info("remembered postgres port is taken; choosing another", "port", state.PostgresPort)
			}
			if state.PostgresPort, err = freePort(); err != nil {
				return nil, state, fmt.Errorf("choose a port for postgres: %w", err)
			}
		}
		pg.port = state.PostgresPort
		if ctx.Err() != nil {
			return pg, state, nil
		}
		if err := pg.start(pgCtx); err != nil {
			return nil, state, err
		}
		logger.Info("postgres started", "data", pg.dataDir, "port", pg.port, "log", pg.logFile)
		defer func() {
			if err != nil {
				stopCtx, cancel := context.WithTimeout(pgCtx, pgCommandTimeout)
				defer cancel()
				if serr := pg.stop(stopCtx); serr != nil {
					logger.Error("stop postgres", "err", serr, "log", pg.logFile)
				}
			}
		}()
	}
	if pg.port != state.PostgresPort {
		// A reused server may have been started on another port (by hand,
		// or before dev.json was lost): remember where it really is.
		state.PostgresPort = pg.port
	}
	if err := saveDevState(statePath, state); err != nil {
		return nil, state, err
	}
	if ctx.Err() != nil {
		return pg, state, nil
	}
	if err := ensureDatabase(ctx, pg.url("postgres"), devDatabase); err != nil {
		return nil, state, err
	}
	return pg, state, nil
}

// splitDirFlag removes --dir (or -dir, with "=" or as two arguments) from
// args, which loadConfig does not know, and returns its value, defaulting
// to devDefaultDir.
func splitDirFlag(args []string) (dir string, rest []string, err error) {
	dir = devDefaultDir
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "dir" {
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return "", nil, &configError{Setting: "--dir", Problem: "needs a directory"}
			}
			i++
			value = args[i]
		}
		if value == "" {
			return "", nil, &configError{Setting: "--dir", Problem: "needs a directory"}
		}
		dir = value
	}
	return dir, rest, nil
}

// loadDevState reads dev.json, generating whatever is missing in it (all
// of it on the first run). It does not choose the port: that is done when
// PostgreSQL is started.
func loadDevState(path string) (devState, error) {
	var st devState
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return st, fmt.Errorf("read %s: %w", path, err)
	default:
		if err := json.Unmarshal(b, &st); err != nil {
			return st, fmt.Errorf("read %s: %w (delete the file to generate new credentials)", path, err)
		}
	}
	if st.WebhookSecret == "" {
		if st.WebhookSecret, err = randomHex(32); err != nil {
			return st, fmt.Errorf("generate webhook secret: %w", err)
		}
	}
	if st.RPCToken == "" {
		if st.RPCToken, err = randomHex(32); err != nil {
			return st, fmt.Errorf("generate RPC token: %w", err)
		}
	}
	if st.PostgresPassword == "" {
		if st.PostgresPassword, err = randomHex(24); err != nil {
			return st, fmt.Errorf("generate postgres password: %w", err)
		}
	}
	return st, nil
}

// saveDevState writes dev.json with mode 0600, atomically, so an
// interrupted write never leaves a half file that would cost the user their
// remembered credentials.
func saveDevState(path string, st devState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	b = append(b, '\n')
	if old, err := os.ReadFile(path); err == nil && string(old) == string(b) {
		// Unchanged; only make sure nobody widened its mode.
		if err := os.Chmod(path, 0o600); err != nil {
			return fmt.Errorf("restrict %s: %w", path, err)
		}
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".dev.json.*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name()) // after a successful rename this is a no-op
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// randomHex returns n random bytes, hex-encoded.
func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// portFree reports whether a listener could bind 127.0.0.1:port right now.
func portFree(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// lockFile takes an exclusive flock on path (creating it) and returns the
// function that releases it. It waits for another holder.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock state directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock state directory: %w", err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// findPGBinDir returns the directory holding initdb and pg_ctl: the one
// pg_config names, else the newest /usr/lib/postgresql/*/bin (Debian and
// Ubuntu do not put the server binaries on PATH), else wherever PATH finds
// initdb.
func findPGBinDir() (string, error) {
	hasServer := func(d string) bool {
		for _, name := range []string{"initdb", "pg_ctl"} {
			if fi, err := os.Stat(filepath.Join(d, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); d != "" && hasServer(d) {
			return d, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if hasServer(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if p, err := filepath.EvalSymlinks(p); err == nil && hasServer(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries found (looked at pg_config --bindir, /usr/lib/postgresql/*/bin and PATH for initdb and pg_ctl): install PostgreSQL, or run serve with DATABASE_URL")
}

// pgMajor is the version number in /usr/lib/postgresql/<version>/bin, for
// ordering newest first; 0 when it is not a number.
func pgMajor(bindir string) float64 {
	v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(bindir)), 64)
	if err != nil {
		return 0
	}
	return v
}

// localPG is dev's PostgreSQL cluster under the state directory.
type localPG struct {
	bindir  string
	dataDir string
	logFile string
	sockDir string
	// asPostgres is set when we are root: PostgreSQL refuses to run as root,
	// so its commands run as the postgres OS user, who owns the data.
	asPostgres bool
	uid, gid   int
	port       int
	// started is true when this process started the server, and so must
	// stop it.
	started bool
	// tmpSockDir is set when the socket directory is one we made under /tmp
	// (the state directory's path being too long), to remove after stop.
	tmpSockDir bool
	// password is the postgres role's password, set at initdb.
	password string
	logger   *slog.Logger
}

// newLocalPG finds the PostgreSQL binaries and prepares the state
// directory's paths and their ownership; it starts nothing.
func newLocalPG(stateDir string, logger *slog.Logger) (*localPG, error) {
	bindir, err := findPGBinDir()
	if err != nil {
		return nil, err
	}
	pg := &localPG{
		bindir:  bindir,
		dataDir: filepath.Join(stateDir, "pgdata"),
		logFile: filepath.Join(stateDir, "postgres.log"),
		sockDir: filepath.Join(stateDir, "run"),
		uid:     -1,
		gid:     -1,
		logger:  logger,
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, PostgreSQL must run as the postgres OS user, which was not found: %w", err)
		}
		pg.asPostgres = true
		if pg.uid, err = strconv.Atoi(u.Uid); err != nil {
			return nil, fmt.Errorf("look up postgres user: uid %q: %w", u.Uid, err)
		}
		if pg.gid, err = strconv.Atoi(u.Gid); err != nil {
			return nil, fmt.Errorf("look up postgres user: gid %q: %w", u.Gid, err)
		}
	}
	for _, d := range []string{pg.dataDir, pg.sockDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	// PostgreSQL refuses a data directory others can read (a chmod -R or a
	// copy can widen it); it allows u=rwx with at most g=rx.
	if fi, err := os.Stat(pg.dataDir); err == nil && fi.Mode().Perm()&0o027 != 0 {
		if err := os.Chmod(pg.dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("restrict data directory: %w", err)
		}
	}
	// pg_ctl opens the log as the user it runs as.
	lf, err := os.OpenFile(pg.logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("create postgres log: %w", err)
	}
	lf.Close()
	if pg.asPostgres {
		if err := chownTree(pg.dataDir, pg.uid, pg.gid); err != nil {
			return nil, fmt.Errorf("give the data directory to the postgres user: %w", err)
		}
		for _, p := range []string{pg.sockDir, pg.logFile} {
			if err := os.Chown(p, pg.uid, pg.gid); err != nil {
				return nil, fmt.Errorf("give %s to the postgres user: %w", p, err)
			}
		}
		// Every parent must be searchable by postgres, which a home
		// directory such as /root usually is not; say so plainly instead of
		// letting initdb fail with "permission denied" half-way.
		if err := pg.command(context.Background(), "test", "-w", pg.dataDir).Run(); err != nil {
			return nil, fmt.Errorf("PostgreSQL runs as the postgres OS user when gitlease runs as root, and that user cannot write %s: make its parent directories searchable by others (chmod o+x), or use --dir to put the state elsewhere", pg.dataDir)
		}
	}
	return pg, nil
}

// useShortSocketDir moves the socket to a fresh directory under /tmp when
// its path in the state directory would be longer than a unix socket path
// may be. Only a server we start needs it, so start calls it.
func (pg *localPG) useShortSocketDir() error {
	// 10 digits is more than any port takes: a conservative check that does
	// not depend on which port is used this time.
	if len(pg.sockDir)+len("/.s.PGSQL.")+10 <= maxSocketPath {
		return nil
	}
	d, err := os.MkdirTemp("/tmp", "gitlease-")
	if err != nil {
		return fmt.Errorf("create short socket directory: %w", err)
	}
	if pg.asPostgres {
		if err := os.Chown(d, pg.uid, pg.gid); err != nil {
			os.Remove(d)
			return fmt.Errorf("give %s to the postgres user: %w", d, err)
		}
	}
	pg.sockDir, pg.tmpSockDir = d, true
	return nil
}

// chownTree gives root and everything under it to uid:gid, unless root is
// already theirs (the usual case after the first run).
func chownTree(root string, uid, gid int) error {
	fi, err := os.Lstat(root)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
		return nil
	}
	return filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// command builds the command for a PostgreSQL program (a bare name is
// taken from the server's bindir), as the postgres user when we are root.
// It runs in its own process group so that a Ctrl-C at the terminal does
// not reach it: the server is stopped deliberately, after serve drained.
func (pg *localPG) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	prog := name
	if !strings.Contains(name, "/") && name != "test" {
		prog = filepath.Join(pg.bindir, name)
	}
	var cmd *exec.Cmd
	switch {
	case !pg.asPostgres:
		cmd = exec.CommandContext(ctx, prog, args...)
	case hasProgram("runuser"):
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", prog}, args...)...)
	default:
		quoted := []string{shellQuote(prog)}
		for _, a := range args {
			quoted = append(quoted, shellQuote(a))
		}
		cmd = exec.CommandContext(ctx, "su", "-s", "/bin/sh", "postgres", "-c", strings.Join(quoted, " "))
	}
	// "/" is readable by everyone; our working directory may not be
	// readable by the postgres user.
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// run runs a PostgreSQL program with pgCommandTimeout, returning its
// output in the error when it fails.
func (pg *localPG) run(ctx context.Context, what, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, pgCommandTimeout)
	defer cancel()
	out, err := pg.command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", what, err, oneLine(string(out)))
	}
	return nil
}

// initdb creates the cluster, once: a data directory holding PG_VERSION
// is already one.
func (pg *localPG) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(pg.dataDir, "PG_VERSION")); err == nil {
		return nil
	}
	pg.logger.Info("creating postgres cluster", "data", pg.dataDir, "bindir", pg.bindir)
	// No trust: on a shared machine every local user could otherwise log
	// in as the superuser. The socket takes only the postgres OS user
	// (peer); TCP, which dev uses, takes the password in dev.json.
	pwfile := filepath.Join(pg.sockDir, "initdb.pw")
	if err := os.WriteFile(pwfile, []byte(pg.password+"\n"), 0o600); err != nil {
		return fmt.Errorf("write the initdb password file: %w", err)
	}
	defer os.Remove(pwfile)
	if pg.asPostgres {
		if err := os.Chown(pwfile, pg.uid, pg.gid); err != nil {
			return fmt.Errorf("give the initdb password file to the postgres user: %w", err)
		}
	}
	// --locale=C: with -E UTF8, a non-UTF-8 locale in the environment would
	// make initdb refuse; dev data does not need a language's collation.
	return pg.run(ctx, "initdb", "initdb", "-D", pg.dataDir, "-U", "postgres", "--auth-local=peer", "--auth-host=scram-sha-256",
		"--pwfile="+pwfile, "-E", "UTF8", "--locale=C")
}

// running reports whether a server is running on the data directory.
func (pg *localPG) running(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, pgCommandTimeout)
	defer cancel()
	out, err := pg.command(ctx, "pg_ctl", "status", "-D", pg.dataDir).CombinedOutput()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exitErr) && exitErr.ExitCode() == 3:
		// pg_ctl's documented "not running".
		return false, nil
	}
	return false, fmt.Errorf("check whether postgres runs: %w: %s", err, oneLine(string(out)))
}

// runningPort reads the port of the running server from postmaster.pid
// (its fourth line) and checks it answers there.
func (pg *localPG) runningPort() (int, error) {
	b, err := os.ReadFile(filepath.Join(pg.dataDir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("read running postgres's port: %w", err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return 0, fmt.Errorf("read running postgres's port: postmaster.pid has %d lines", len(lines))
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil {
		return 0, fmt.Errorf("read running postgres's port: %w", err)
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		return 0, fmt.Errorf("a postgres is running on %s but does not answer at 127.0.0.1:%d (stop it with pg_ctl stop -D %s): %w", pg.dataDir, port, pg.dataDir, err)
	}
	conn.Close()
	return port, nil
}

// start starts the server on 127.0.0.1:pg.port and the socket directory,
// and waits until it accepts connections.
func (pg *localPG) start(ctx context.Context) error {
	if err := pg.useShortSocketDir(); err != nil {
		return err
	}
	// pg_ctl hands -o to a shell, hence the quoting.
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s", pg.port, shellQuote(pg.sockDir))
	// Only what this start writes to the log is worth quoting on failure.
	var logStart int64
	if fi, err := os.Stat(pg.logFile); err == nil {
		logStart = fi.Size()
	}
	err := pg.run(ctx, "start postgres", "pg_ctl", "start", "-w", "-t", "60", "-D", pg.dataDir, "-l", pg.logFile, "-o", opts)
	if err != nil {
		// A failed or timed-out start may still have left a server
		// behind; make sure it is gone before reporting.
		if running, _ := pg.running(ctx); running {
			pg.started = true
			if serr := pg.stop(ctx); serr != nil {
				pg.logger.Error("stop postgres after failed start", "err", serr)
			}
		}
		if pg.tmpSockDir {
			os.RemoveAll(pg.sockDir)
		}
		if tail := logTail(pg.logFile, logStart, 5); tail != "" {
			return fmt.Errorf("%w; %s says: %s", err, pg.logFile, tail)
		}
		return err
	}
	pg.started = true
	return nil
}

// stop stops a server this process started (fast shutdown: sessions are
// disconnected, data is flushed) and waits until it is gone. If pg_ctl
// fails, the postmaster gets SIGQUIT so that nothing outlives dev.
func (pg *localPG) stop(ctx context.Context) error {
	if !pg.started {
		return nil
	}
	defer func() {
		if pg.tmpSockDir {
			os.RemoveAll(pg.sockDir)
		}
	}()
	pid := postmasterPID(pg.dataDir)
	err := pg.run(ctx, "stop postgres", "pg_ctl", "stop", "-w", "-t", "60", "-m", "fast", "-D", pg.dataDir)
	if err == nil {
		// pg_ctl returns once postmaster.pid is gone, which the postmaster
		// removes just before it exits: wait for the exit itself, so that
		// no server process outlives dev.
		if pid > 0 && !waitGone(pid, 10*time.Second) {
			return fmt.Errorf("stop postgres: postmaster %d still running after pg_ctl stop", pid)
		}
		pg.started = false
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
	pg.started = false
	return nil
}

// waitGone waits up to limit for process pid to exit and reports whether
// it did. A zombie counts as gone: it runs nothing, and its parent (init,
// since pg_ctl detaches the postmaster) is the one to reap it.
func waitGone(pid int, limit time.Duration) bool {
	for deadline := time.Now().Add(limit); ; time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil || isZombie(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// isZombie reports whether /proc says pid has exited but is not reaped
// yet; false where there is no /proc.
func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may itself
	// contain spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// postmasterPID is the pid in the data directory's postmaster.pid, or 0.
func postmasterPID(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0
	}
	return pid
}

// url is the connection URL of database db on the server, over TCP.
func (pg *localPG) url(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword("postgres", pg.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(pg.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// ensureDatabase creates database name on the server at adminURL unless it
// exists.
func ensureDatabase(ctx context.Context, adminURL, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to dev postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42P04") { // duplicate_database: someone was faster
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// printDevBanner prints, once the server listens on addr, what a developer
// needs to talk to it. These are dev credentials shown to the person who
// ran the command, on stdout; logs (stderr) never carry them.
func printDevBanner(w io.Writer, addr, secret, token string, pg *localPG, dryRun bool) {
	port := addr
	if _, p, err := net.SplitHostPort(addr); err == nil {
		port = p
	}
	base := "http://127.0.0.1:" + port
	pgNote := "started by dev; stopped on exit"
	if !pg.started {
		pgNote = "already running; left running on exit"
	}
	ghNote := "the GitHub App configured in the environment"
	if dryRun {
		ghNote = "dry run: no App credentials, so GitHub calls go to the dry-run recorder,\n                  which logs each one (\"dry-run GitHub call\" on stderr) and sends nothing"
	}
	fmt.Fprintf(w, `
gitlease dev is ready.

  base URL        %[1]s
  webhook URL     %[1]s/webhook
  webhook secret  %[2]s
  RPC token       %[3]s
  PostgreSQL      %[4]s (%[5]s; data in %[6]s)
  GitHub          %[7]s

Try:
  curl -s -H "Authorization: Bearer %[3]s" -d '{"jsonrpc":"2.0","id":1,"method":"queue/stats"}' %[1]s/rpc
  gitlease deliver --event issues --secret %[2]s --url %[1]s/webhook testdata/payloads/issues-opened.json

Ctrl-C stops it.
`, base, secret, token, pg.url(devDatabase), pgNote, pg.dataDir, ghNote)
}

// hasProgram reports whether name is on PATH.
func hasProgram(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

// shellQuote quotes s for sh as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// oneLine squeezes a command's output into one line for an error message.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// logTail returns the last n non-empty lines of a file after byte offset,
// joined with " | ", or "" if it cannot be read.
func logTail(path string, offset int64, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
			if len(lines) > n {
				lines = lines[1:]
			}
		}
	}
	return strings.Join(lines, " | ")
}
