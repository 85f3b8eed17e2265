package main

import (
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
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gitlease/gitlease/app"
	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/db/pgcluster"
)

const (
	// devDefaultDir is the state directory dev uses unless --dir says
	// otherwise, relative to the working directory.
	devDefaultDir = ".gitlease"
	// devDatabase is the database dev creates in its cluster and serves
	// from, so the cluster's own postgres database stays clean.
	devDatabase = "gitlease"
)

// devState is what dev remembers across runs in <dir>/dev.json: the port
// of its PostgreSQL and the credentials a developer pasted elsewhere (a
// webhook configuration, a worker's environment), which must not change
// under them at every restart.
type devState struct {
	PostgresPort  int    `json:"postgres_port"`
	WebhookSecret string `json:"webhook_secret"`
	RPCToken      string `json:"rpc_token"`
	UIToken       string `json:"ui_token"`
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

	pg, state, err := setUpDevPostgres(ctx, stateDir, os.Getenv("GITLEASE_PG_BINDIR"), logger)
	if err != nil {
		return err
	}
	if pg.Started() {
		defer func() {
			// ctx is usually cancelled by now (Ctrl-C): the stop must still run.
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pgcluster.DefaultCommandTimeout)
			defer cancel()
			if err := pg.Stop(stopCtx); err != nil {
				logger.Error("stop postgres", "err", err, "log", pg.LogFile())
				return
			}
			logger.Info("postgres stopped", "data", pg.DataDir())
		}()
	}
	if ctx.Err() != nil {
		// Interrupted while PostgreSQL was coming up: a clean exit.
		return nil
	}

	cfg.DatabaseURL = pg.URL(devDatabase)
	// What dev serves is for this machine only, as its banner says.
	cfg.ListenHost = "127.0.0.1"
	// Credentials the user set explicitly (env or flag) win over ours.
	if len(cfg.WebhookSecrets) == 0 {
		cfg.WebhookSecrets = []app.Secret{app.Secret(state.WebhookSecret)}
	}
	if cfg.RPCToken == "" {
		cfg.RPCToken = app.Secret(state.RPCToken)
	}
	if cfg.UIToken == "" {
		cfg.UIToken = app.Secret(state.UIToken)
	}
	dryRun := !hasGitHubCredentials(cfg)
	if dryRun {
		cfg.WebURL = devHTMLURL + "/" // the dashboard links where the fake's html_url fields point
	}
	ready := func(addr string) {
		printDevBanner(stdout, addr, string(cfg.WebhookSecrets[0]), string(cfg.RPCToken), pg, dryRun)
		printDevDashboard(stdout, addr, string(cfg.UIToken))
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
	// githubDryRun (dev): the strict fake GitHub, auto-creating what calls
	// name, stands in for GitHub, so the whole flow runs locally and each
	// write is logged instead of sent.
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
// fresh in-process fake GitHub (through transport, so its calls are counted
// like real ones; see newDevGitHub); else nil.
func githubInstallations(cfg config, fallback githubFallback, transport func(http.RoundTripper) http.RoundTripper, budgets github.BudgetRecorder, logger *slog.Logger) (*github.Installations, error) {
	if fallback != githubDryRun || hasGitHubCredentials(cfg) {
		return githubFromConfig(cfg, transport(nil), budgets, logger)
	}
	// The fake itself (what it recorded) is for the dashboard, once there
	// is one to show it.
	gh, _, err := newDevGitHub(cfg, transport, logger)
	if err != nil {
		return nil, err
	}
	logger.Info("no GitHub App credentials: GitHub calls go to an in-process fake GitHub, which logs what it would send (msg \"dry-run GitHub call\")")
	return gh, nil
}

// setUpDevPostgres brings the state directory's PostgreSQL to the point
// where the gitlease database answers on 127.0.0.1, and returns it with
// the remembered state. bindir is GITLEASE_PG_BINDIR ("" to search). It
// holds an exclusive lock on the state directory meanwhile so two dev
// processes started together do not both initdb or start the same
// cluster. If it started PostgreSQL and then fails, it stops it again
// before returning.
func setUpDevPostgres(ctx context.Context, stateDir, bindir string, logger *slog.Logger) (_ *pgcluster.Cluster, _ devState, err error) {
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

	// PostgreSQL commands are not tied to ctx: killing initdb or pg_ctl
	// half-way leaves a broken data directory or an unsupervised server.
	// Each is bounded by the cluster's command timeout instead, and ctx is
	// checked between steps.
	pgCtx := context.WithoutCancel(ctx)
	home, err := devPGHome(stateDir)
	if err != nil {
		return nil, devState{}, err
	}
	pg, err := pgcluster.New(pgCtx, logger, pgcluster.Config{
		BinDir:    bindir,
		DataDir:   filepath.Join(home, "pgdata"),
		LogFile:   filepath.Join(home, "postgres.log"),
		SocketDir: filepath.Join(home, "run"),
		Password:  state.PostgresPassword,
	})
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		return nil, state, fmt.Errorf("%w: install PostgreSQL, set GITLEASE_PG_BINDIR, or run serve with DATABASE_URL", err)
	}
	if errors.Is(err, pgcluster.ErrNotWritable) {
		return nil, state, fmt.Errorf("%w (dev: --dir puts the state elsewhere)", err)
	}
	if err != nil {
		return nil, state, err
	}
	if err := pg.Init(pgCtx); err != nil {
		return nil, state, err
	}
	running, err := pg.Running(pgCtx)
	if err != nil {
		return nil, state, err
	}
	if running {
		if err := pg.Reuse(pgCtx); err != nil {
			return nil, state, err
		}
		logger.Info("reusing running postgres", "data", pg.DataDir(), "port", pg.Port())
	} else {
		port := state.PostgresPort
		if port != 0 && !pgcluster.PortFree(port) {
			logger.Info("remembered postgres port is taken; choosing another", "port", port)
			port = 0
		}
		if ctx.Err() != nil {
			return pg, state, nil
		}
		if err := pg.Start(pgCtx, port); err != nil {
			return nil, state, err
		}
		logger.Info("postgres started", "data", pg.DataDir(), "port", pg.Port(), "log", pg.LogFile())
		defer func() {
			if err != nil {
				stopCtx, cancel := context.WithTimeout(pgCtx, pgcluster.DefaultCommandTimeout)
				defer cancel()
				if serr := pg.Stop(stopCtx); serr != nil {
					logger.Error("stop postgres", "err", serr, "log", pg.LogFile())
				}
			}
		}()
	}
	// A reused server may have been started on another port (by hand, or
	// before dev.json was lost): remember where it really is.
	state.PostgresPort = pg.Port()
	if err := saveDevState(statePath, state); err != nil {
		return nil, state, err
	}
	if ctx.Err() != nil {
		return pg, state, nil
	}
	if err := pg.EnsureDatabase(ctx, devDatabase); err != nil {
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
	if st.UIToken == "" {
		if st.UIToken, err = randomHex(16); err != nil {
			return st, fmt.Errorf("generate dashboard token: %w", err)
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

// printDevBanner prints, once the server listens on addr, what a developer
// needs to talk to it. These are dev credentials shown to the person who
// ran the command, on stdout; logs (stderr) never carry them.
func printDevBanner(w io.Writer, addr, secret, token string, pg *pgcluster.Cluster, dryRun bool) {
	port := addr
	if _, p, err := net.SplitHostPort(addr); err == nil {
		port = p
	}
	base := "http://127.0.0.1:" + port
	pgNote := "started by dev; stopped on exit"
	if !pg.Started() {
		pgNote = "already running; left running on exit"
	}
	ghNote := "the GitHub App configured in the environment"
	if dryRun {
		ghNote = "dry run: no App credentials, so GitHub calls go to an in-process fake GitHub\n                  (the tests' strict one, creating the repositories they name), which logs\n                  each one (\"dry-run GitHub call\" on stderr) and sends nothing"
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
  GITHUB_WEBHOOK_SECRET=%[2]s %[8]s deliver --event issues --url %[1]s/webhook testdata/payloads/issues-opened.json
`, base, secret, token, pg.URL(devDatabase), pgNote, pg.DataDir(), ghNote, devCommand())
}
