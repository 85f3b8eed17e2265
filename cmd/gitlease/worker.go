package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/app/service"
	"github.com/gitlease/gitlease/app/tracing"
	"github.com/gitlease/gitlease/app/worker"
	"github.com/gitlease/gitlease/app/worker/sandbox"
	"github.com/gitlease/gitlease/queue/rpc"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/queue"
)

// builtinWorker is serve's built-in worker with its lease recovery
// sweeper. With the worker disabled (GITLEASE_WORKER_SLOTS=0) both are nil
// and its methods do nothing.
type builtinWorker struct {
	worker  *worker.Worker
	sweeper *worker.Sweeper
}

// newBuiltinWorker makes the built-in worker and the sweeper as
// gitlease-serve/<instance>, unless cfg disables the worker.
func newBuiltinWorker(cfg config, store *queue.Store, pool *pgxpool.Pool, gh *github.Installations, traces *tracing.Provider, logger *slog.Logger) (*builtinWorker, error) {
	if cfg.WorkerSlots == 0 {
		logger.Info("built-in worker disabled (GITLEASE_WORKER_SLOTS=0)")
		return &builtinWorker{}, nil
	}
	if cfg.WorkerExec == "" {
		logger.Info("GITLEASE_WORKER_EXEC is not set: the built-in worker completes each item once it is provisioned")
	}
	wcfg := worker.WorkerConfig{Slots: cfg.WorkerSlots, Exec: cfg.WorkerExec, OwnerID: worker.BuiltinOwnerPrefix + worker.NewInstanceID(),
		User: cfg.WorkerUser, PassEnv: cfg.WorkerEnv, Sandbox: cfg.WorkerSandbox, Timeout: cfg.WorkerTimeout,
		Hide: hiddenFromCommands(cfg.SecretFiles...), TracerProvider: traces.TracerProvider()}
	warnUnsandboxed(logger, cfg.WorkerExec, cfg.WorkerSandbox)
	if gh == nil {
		// Without credentials no branch is created (its outbox row waits),
		// so waiting minutes for one would only hold the slot.
		wcfg.ProvisionWait = time.Second
	} else {
		wcfg.Progress, wcfg.ProgressInterval = outbox.NewProgress(pool, gh, cfg.PublicURL), cfg.ProgressInterval
	}
	w, err := worker.NewWorker(store, pool, gh, wcfg, logger)
	if err != nil {
		return nil, workerConfigError("GITLEASE_WORKER_SLOTS", err)
	}
	return &builtinWorker{worker: w, sweeper: worker.NewSweeper(store, w, worker.SweeperConfig{}, logger)}, nil
}

// members are the built-in worker's two places in serve's group, around
// the HTTP server between them: leasing starts once the server listens
// and stops before it drains; the running commands are waited for, and
// the items of the unfinished ones released, once it has drained.
func (b *builtinWorker) members(http service.Member) []service.Member {
	return []service.Member{
		{Name: "built-in worker's running items", Stop: b.stop},
		http,
		{Name: "built-in worker", Start: b.start, Stop: b.stopLeasing},
	}
}

// start starts the worker, then the sweeper.
func (b *builtinWorker) start(ctx context.Context) error {
	if b.worker == nil {
		return nil
	}
	if err := b.worker.Start(ctx); err != nil {
		return err
	}
	if err := b.sweeper.Start(ctx); err != nil {
		b.worker.Stop()
		return fmt.Errorf("lease recovery sweeper: %w", err)
	}
	return nil
}

// workerConfigError names the setting a worker could not be made with:
// the sandbox's when the machine allows none.
func workerConfigError(setting string, err error) error {
	var un *sandbox.UnavailableError
	if errors.As(err, &un) {
		return &configError{Setting: sandbox.Setting, Problem: un.Error()}
	}
	return &configError{Setting: setting, Problem: err.Error()}
}

// warnUnsandboxed logs, at start, that worker commands run unsandboxed.
func warnUnsandboxed(logger *slog.Logger, exec string, mode sandbox.Mode) {
	if exec != "" && mode == sandbox.None {
		logger.Warn("GITLEASE_WORKER_SANDBOX=none: worker commands run unsandboxed and can see each other's processes, tokens and files, and the server's files (docs/security.md)")
	}
}

// stopLeasing stops recovering and leasing new work; running commands get
// their grace period from now on.
func (b *builtinWorker) stopLeasing(context.Context) error {
	if b.sweeper != nil {
		b.sweeper.Stop()
	}
	if b.worker != nil {
		b.worker.StopLeasing()
	}
	return nil
}

// stop waits for running commands (up to the grace period) and releases
// the items of the others to pending. It is safe to call more than once.
func (b *builtinWorker) stop(ctx context.Context) error {
	_ = b.stopLeasing(ctx)
	if b.worker != nil {
		b.worker.Stop()
	}
	return nil
}

const workerUsage = `Usage: gitlease worker --url URL --exec CMD [--slots N] [--owner ID]

A remote worker: leases items from a gitlease server over /rpc, with the
bearer token in GITLEASE_RPC_WORKER_TOKEN (or GITLEASE_RPC_WORKER_TOKEN_FILE),
else GITLEASE_RPC_TOKEN (or its _FILE), never a flag, and runs CMD
(sh -c) for each, like serve's built-in worker. The item is in the command's
environment (GITLEASE_ENTRY_ID, GITLEASE_HEAD_REF, ...), with PATH, LANG,
LC_ALL, LC_CTYPE, TZ and the variables GITLEASE_WORKER_ENV names
(comma-separated) from this process's, each in a sandbox of its own with
its own HOME and /tmp (GITLEASE_WORKER_SANDBOX, GITLEASE_WORKER_TIMEOUT);
GITLEASE_WORKER_USER runs the commands as that user. GITHUB_TOKEN is passed on from this process's environment if
set: a remote worker gets no installation token. On SIGTERM or SIGINT it stops leasing, lets running
commands finish for --grace, then stops them and releases their items.

Flags:
`

// runWorker is `gitlease worker`.
func runWorker(ctx context.Context, args []string, stderr io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("gitlease worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, workerUsage)
		fs.PrintDefaults()
	}
	serverURL := fs.String("url", os.Getenv("GITLEASE_URL"), "the gitlease server's base URL (or its /rpc URL) (env GITLEASE_URL)")
	execCmd := fs.String("exec", "", "shell command (sh -c) run per leased item (required)")
	slots := fs.Int("slots", 1, "items run at once, 1..5")
	owner := fs.String("owner", "", "lease owner ID (default gitlease-worker/<host>-<random>)")
	poll := fs.Duration("poll", 5*time.Second, "how often to ask for work")
	grace := fs.Duration("grace", 25*time.Second, "how long running commands may finish after SIGTERM")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return &configError{Setting: "flags", Problem: err.Error()}
	}
	// Before any secret is read or any command started: no process of
	// this user reads this one's token from /proc.
	if err := makeNonDumpable(); err != nil {
		return err
	}
	// The environment's settings, read and checked as serve reads them
	// (GITLEASE_RPC_WORKER_TOKEN, else GITLEASE_RPC_TOKEN, each or its
	// _FILE and of at least 16 characters; GITLEASE_WORKER_ENV,
	// GITLEASE_WORKER_USER, GITLEASE_WORKER_SANDBOX, GITLEASE_WORKER_TIMEOUT);
	// the flags above are the worker's own.
	cfg, err := loadConfig("worker", nil, false, stderr)
	if err != nil {
		return err
	}
	token := string(cfg.RPCWorkerToken)
	if token == "" {
		token = string(cfg.RPCToken)
	}
	switch {
	case strings.TrimSpace(*serverURL) == "":
		return &configError{Setting: "--url", Problem: "required (the gitlease server's URL)"}
	case token == "":
		return &configError{Setting: "GITLEASE_RPC_WORKER_TOKEN", Problem: "required (or GITLEASE_RPC_TOKEN): the bearer token for /rpc"}
	case strings.TrimSpace(*execCmd) == "":
		return &configError{Setting: "--exec", Problem: "required (the command to run per item)"}
	case *slots < 1 || *slots > worker.MaxWorkerSlots:
		return &configError{Setting: "--slots", Problem: fmt.Sprintf("%d is not a number from 1 to %d", *slots, worker.MaxWorkerSlots)}
	case *poll <= 0 || *grace <= 0:
		return &configError{Setting: "--poll/--grace", Problem: "must be positive durations"}
	}
	if *owner == "" {
		*owner = "gitlease-worker/" + worker.NewInstanceID()
	}
	client, err := rpc.NewClient(*serverURL, token, &http.Client{Timeout: time.Minute})
	if err != nil {
		return &configError{Setting: "--url", Problem: err.Error()}
	}
	// Fail now, with a clear line, on a wrong URL or token.
	checkCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = client.Call(checkCtx, rpc.MethodStats, nil, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("reach the gitlease server at %s: %w", *serverURL, err)
	}
	warnUnsandboxed(logger, *execCmd, cfg.WorkerSandbox)
	w, err := worker.NewRemoteWorker(client, worker.WorkerConfig{
		Slots: *slots, Exec: *execCmd, OwnerID: *owner, Poll: *poll, Grace: *grace,
		PassEnv: cfg.WorkerEnv, User: cfg.WorkerUser,
		Sandbox: cfg.WorkerSandbox, Timeout: cfg.WorkerTimeout, Hide: hiddenFromCommands(cfg.SecretFiles...),
	}, logger)
	if err != nil {
		return workerConfigError("--owner", err)
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("shutting down: no new work; running commands have their grace period", "grace", grace.String())
	w.Stop()
	return nil
}
