package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/gitlease/gitlease/app/service"
	"github.com/gitlease/gitlease/app/ui"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/app/redeliver"
	"github.com/gitlease/gitlease/app/setup"
	"github.com/gitlease/gitlease/app/tracing"
	"github.com/gitlease/gitlease/app/worker"
	"github.com/gitlease/gitlease/app/worker/sandbox"

	"github.com/cenkalti/backoff/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/gitlease/gitlease"
	"github.com/gitlease/gitlease/app"
	"github.com/gitlease/gitlease/db"
	"github.com/gitlease/gitlease/db/prune"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/queue/rpc"
	"github.com/gitlease/gitlease/webhook"
)

func rpcManifest() rpc.Manifest { return rpc.NewManifest(version) }

// openPool makes the pool every command's queries and listeners use
// (db.PoolConfig: only a server that takes writes) and checks that
// Postgres answers. When every host that answers is read-only (a failover
// under way, or standbys only), the pool is returned with the error, which
// db.ReadOnly recognises: serve then runs, answering 503, until a host is
// promoted.
func openPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := db.PoolConfig(url)
	if err != nil {
		var uerr *db.URLError
		if errors.As(err, &uerr) {
			return nil, &configError{Setting: "DATABASE_URL", Problem: uerr.Problem}
		}
		return nil, err
	}
	pool, err := db.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		err = fmt.Errorf("connect to Postgres at %s: %w", cfg.ConnConfig.Host, err)
		if db.ReadOnly(err) {
			return pool, err
		}
		pool.Close()
		return nil, err
	}
	return pool, nil
}

func runMigrate(ctx context.Context, args []string, stderr io.Writer, logger *slog.Logger) error {
	cfg, err := loadConfig("migrate", args, true, stderr, "DATABASE_URL")
	if err != nil {
		return err
	}
	pool, _, err := openMigrated(ctx, cfg.DatabaseURL, true, false, logger)
	if err != nil {
		return err
	}
	pool.Close()
	return nil
}

// openMigrated opens the pool and, when migrate is set, applies the
// migrations first, as every command that talks to the queue starts. With
// waitWritable (serve), a database with no writable primary yet is not an
// error: deferred then says the migrations are still to be applied, which
// deferredMigrations does once a host takes writes.
func openMigrated(ctx context.Context, url string, migrate, waitWritable bool, logger *slog.Logger) (_ *pgxpool.Pool, deferred bool, _ error) {
	pool, err := openPool(ctx, url)
	if err != nil && !(waitWritable && db.ReadOnly(err)) {
		if pool != nil {
			pool.Close()
		}
		return nil, false, err
	}
	if err != nil {
		logger.Warn("no writable primary among DATABASE_URL's hosts: serving 503 until one is promoted", "err", err)
		return pool, migrate, nil
	}
	if migrate {
		n, err := db.Migrate(ctx, pool)
		if err != nil {
			pool.Close()
			return nil, false, err
		}
		logger.Info("migrations applied", "count", n)
	}
	return pool, false, nil
}

// deferredMigrations is the service that applies the migrations once pool
// reaches a server that takes writes, retrying with backoff until then or
// until it is stopped.
func deferredMigrations(pool *pgxpool.Pool, logger *slog.Logger) service.Member {
	var s service.Service
	migrate := func(ctx context.Context) {
		retry := &backoff.ExponentialBackOff{InitialInterval: 500 * time.Millisecond, RandomizationFactor: 0.2,
			Multiplier: 2, MaxInterval: 4 * time.Second}
		n, err := backoff.Retry(ctx, func() (int, error) {
			n, err := db.Migrate(ctx, pool)
			if err != nil && !db.ReadOnly(err) && ctx.Err() == nil {
				logger.Warn("migrations not applied yet; retrying", "err", err)
			}
			return n, err
		}, backoff.WithBackOff(retry), backoff.WithMaxElapsedTime(0))
		if err == nil {
			logger.Info("migrations applied", "count", n)
		}
	}
	return service.Member{Name: "deferred migrations",
		Start: func(ctx context.Context) error { return s.Start(ctx, migrate) },
		Stop:  func(context.Context) error { s.Stop(); return nil }}
}

// serveGCPercent is serve's garbage-collection target unless GOGC is set:
// the intake allocates tens of KiB per delivery and keeps little, so a
// higher target trades a few MiB of heap for less collector CPU
// (docs/benchmarks-history.md has the measurement).
const serveGCPercent = 200

func runServe(ctx context.Context, args []string, stderr io.Writer, logger *slog.Logger) error {
	cfg, err := loadConfig("serve", args, true, stderr, "DATABASE_URL", "GITHUB_WEBHOOK_SECRET")
	if err != nil {
		return err
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(serveGCPercent)
	}
	return serve(ctx, cfg, logger, nil, githubOutboxOnly)
}

// serve runs the HTTP server until ctx ends, then drains it. ready, if not
// nil, is called with the bound address once the server listens. Without
// GitHub App credentials, fallback says what stands in for GitHub.
func serve(ctx context.Context, cfg config, logger *slog.Logger, ready func(addr string), fallback githubFallback) error {
	// First, before any secret is used or any command started: a process
	// of the same user can no longer read this one's environment or memory.
	if err := makeNonDumpable(); err != nil {
		return err
	}
	warnRootWorker(logger, os.Geteuid(), cfg)
	pool, migrateLater, err := openMigrated(ctx, cfg.DatabaseURL, cfg.Migrate, true, logger)
	if err != nil {
		return err
	}
	defer pool.Close()
	metrics := app.NewMetrics(pool)
	metrics.InstallationCap(cfg.MaxAssignedPerInstallation)
	traces, err := startTracing(ctx, logger)
	if err != nil {
		return err
	}
	defer stopTracing(ctx, traces, logger)
	notifier := worker.NewNotifier(pool, logger)
	cancelNotifier := worker.NewCancelNotifier(pool, logger)                  // stops cancelled commands on every instance
	outboxNotifier := service.NewNotifier(pool, outbox.OutboxChannel, logger) // wakes every instance's sender
	box := outbox.NewOutbox(nil, logger).SignalWith(outboxNotifier.Signal)
	items := outbox.NewItems(pool)
	store := queue.NewStore(pool, queue.Config{LeaseTTL: cfg.LeaseTTL, MaxAssignedPerInstallation: cfg.MaxAssignedPerInstallation, Observer: box, OnOp: metrics.QueueOp, OnPending: notifier.Signal,
		OnCancel: cancelNotifier.Signal, Views: items})
	// GitHub's limits reach every instance's leases through the database.
	gh, err := githubInstallations(cfg, fallback, githubTransport(cfg, traces, metrics), github.NewBudgets(pool, store, logger), logger)
	if err != nil {
		return err
	}
	// serve's services, started in this order once everything is built
	// and stopped in the reverse order (docs/workers.md, "Shutdown").
	var services service.Group
	if migrateLater {
		services.Add(deferredMigrations(pool, logger))
	}
	services.Add(service.Of("work notifier", notifier), service.Of("cancel notifier", cancelNotifier), service.Of("outbox notifier", outboxNotifier))
	if gh != nil {
		// The sender outlives the HTTP drain and the lease release.
		services.Add(service.Of("GitHub outbox sender", outbox.NewSender(pool, gh, outbox.SenderConfig{PublicURL: cfg.PublicURL, TracerProvider: traces.TracerProvider()}, logger)))
	}
	handler := rpc.NewHandler(store, version, logger)
	srv := app.NewServer(app.ServerConfig{RPCToken: cfg.RPCToken, RPCWorkerToken: cfg.RPCWorkerToken, SelfLoggedRoutes: []string{"/webhook"}, Tracing: traces}, pool, handler, logger)
	metrics.Register(srv.Echo())
	setup, err := setup.New(setup.Config{ManifestYAML: gitlease.ManifestYAML, PublicURL: cfg.PublicURL,
		APIURL: cfg.APIURL, WebURL: cfg.WebURL, AppConfigured: cfg.AppID != 0}, logger)
	if err != nil {
		return err
	}
	setup.Register(srv.Echo())
	var rec *redeliver.Reconciler // the redelivery reconciler; nil without App credentials
	if gh != nil {
		if rec, err = newReconciler(cfg, pool, gh, metrics, logger); err != nil {
			return err
		}
	}
	if err := registerDashboard(srv.Echo(), cfg, pool, store, box, rec, logger); err != nil {
		return err
	}
	intake, err := newIntake(ctx, cfg, store, gh, box, items, metrics, traces, logger)
	if err != nil {
		return err
	}
	srv.Echo().POST("/webhook", echo.WrapHandler(traces.Handler("/webhook", intake)))
	for _, p := range []struct {
		name string
		*prune.Pruner
	}{
		{"delivery pruner", webhook.NewPruner(pool, prune.Config{Retention: cfg.DeliveryRetention}, logger)},
		{"outbox pruner", outbox.NewPruner(pool, prune.Config{}, logger)},
		{"dashboard sign-out pruner", ui.NewSignOutPruner(pool, logger)},
		{"dashboard failed sign-in pruner", ui.NewLoginFailurePruner(pool, logger)},
	} {
		services.Add(service.Of(p.name, &service.Periodic{Name: p.name, Interval: p.Interval(), Run: p.Run, Logger: logger}))
	}
	if cfg.RPCToken == "" && cfg.RPCWorkerToken == "" {
		logger.Warn("neither GITLEASE_RPC_TOKEN nor GITLEASE_RPC_WORKER_TOKEN is set: /rpc is disabled")
	}
	builtin, err := newBuiltinWorker(cfg, store, pool, gh, traces, logger)
	if err != nil {
		return err
	}
	httpSrv := newHTTPServer(srv, cfg.HTTP)
	errc := make(chan error, 1)
	// The built-in worker leases once the server listens and stops leasing
	// before it drains; its commands are waited for, and its unfinished
	// items released, after the drain.
	services.Add(builtin.members(service.Member{Name: "HTTP server",
		Start: func(context.Context) error {
			ln, err := net.Listen("tcp", net.JoinHostPort(cfg.ListenHost, strconv.Itoa(cfg.Port)))
			if err != nil {
				return fmt.Errorf("listen on port %d: %w", cfg.Port, err)
			}
			go func() { errc <- httpSrv.Serve(ln) }()
			logger.Info("serving", "addr", ln.Addr().String(), "version", version)
			if ready != nil {
				ready(ln.Addr().String())
			}
			return nil
		},
		// In-flight requests finish within 30s; the running commands'
		// grace period runs meanwhile.
		Stop: func(ctx context.Context) error {
			shutCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := httpSrv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("drain http server: %w", err)
			}
			return nil
		},
	})...)
	// The reconciler starts once the server listens, so the redeliveries
	// it asks for find it answering; it stops first.
	services.Add(reconcilerService(cfg, rec, logger))
	bg := context.WithoutCancel(ctx) // serve stops its services itself, in order
	if err := services.Start(bg); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return errors.Join(fmt.Errorf("http server: %w", err), services.Stop(bg))
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	return services.Stop(bg)
}

// newIntake builds the POST /webhook handler. Without GitHub App
// credentials (gh nil) a comment command on a pull request cannot look the
// pull request up and is ignored.
func newIntake(ctx context.Context, cfg config, store *queue.Store, gh *github.Installations, box *outbox.Outbox, items *outbox.Items, metrics *app.Metrics, traces *tracing.Provider, logger *slog.Logger) (*webhook.Handler, error) {
	secrets := make([]string, len(cfg.WebhookSecrets))
	for i, s := range cfg.WebhookSecrets {
		secrets[i] = string(s)
	}
	verifier, err := webhook.NewVerifier(secrets...)
	if err != nil {
		return nil, &configError{Setting: "GITHUB_WEBHOOK_SECRET", Problem: "required: " + err.Error()}
	}
	var prs webhook.PullRequestGetter // a nil *github.Installations must stay a nil interface
	var bot webhook.BotIdentity
	botLogin := ""
	if cfg.AppSlug != "" {
		botLogin = cfg.AppSlug + "[bot]"
	}
	if gh != nil {
		prs = gh
		// Learned from GET /app when a bot's event first needs it, and
		// again after a failure, never once at start only.
		bot = github.NewBotAccount(gh, 0)
	}
	mapper, err := webhook.NewMapper(prs, webhook.MapperConfig{TriggerLabel: cfg.TriggerLabel, BranchPrefix: cfg.BranchPrefix,
		BotLogin: botLogin, Bot: bot, AppID: cfg.AppID, AllowedAuthors: cfg.AllowedAuthors})
	if err != nil {
		return nil, &configError{Setting: "GITLEASE_BRANCH_PREFIX", Problem: err.Error()}
	}
	return webhook.NewHandler(store, verifier, mapper, logger, webhook.HandlerConfig{OnAnswer: metrics.Delivery, OnOutcome: box.DeliveryFeedback, TracerProvider: traces.TracerProvider(),
		MaxInflightBody: cfg.MaxInflightBody, CheckSuites: items,
		GroupSize: cfg.IntakeGroupSize, Groups: cfg.IntakeGroups, OnGroup: metrics.IntakeGroup}), nil
}

func runPlugin(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, logger *slog.Logger) error {
	cfg, err := loadConfig("plugin", args, true, stderr, "DATABASE_URL")
	if err != nil {
		return err
	}
	pool, _, err := openMigrated(ctx, cfg.DatabaseURL, true, false, logger)
	if err != nil {
		return err
	}
	defer pool.Close()
	notifier := worker.NewNotifier(pool, logger) // wakes serve's workers for items enqueued here
	if err := notifier.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	defer notifier.Stop()
	store := queue.NewStore(pool, queue.Config{LeaseTTL: cfg.LeaseTTL, MaxAssignedPerInstallation: cfg.MaxAssignedPerInstallation, OnPending: notifier.Signal, Views: outbox.NewItems(pool)})
	session := rpc.NewStdioSession(rpc.NewHandler(store, version, logger), stdout)
	return session.Serve(ctx, stdin)
}

// warnRootWorker logs a warning when serve runs as root (euid 0) with an
// unsandboxed worker command and no GITLEASE_WORKER_USER: root reads any
// process, so the command could read serve's secrets despite its
// non-dumpable flag. Sandboxed, such commands run as nobody.
func warnRootWorker(logger *slog.Logger, euid int, cfg config) {
	if euid == 0 && cfg.WorkerExec != "" && cfg.WorkerUser == "" && cfg.WorkerSlots > 0 && cfg.WorkerSandbox == sandbox.None {
		logger.Warn("serve runs as root and so would its worker commands, able to read its secrets: set GITLEASE_WORKER_USER to run them as another user")
	}
}

// httpBounds are the http.Server limits of docs/http.md. Zero fields take the
// spec's values; tests shorten them.
type httpBounds struct {
	ReadHeaderTimeout time.Duration // 10s
	ReadTimeout       time.Duration // 30s, the whole request, body included
	IdleTimeout       time.Duration // 120s
	MaxHeaderBytes    int           // 64 KiB
}

// newHTTPServer returns the server for h with bounds b, so a slow or
// stalled client is cut off and holds nothing: headers within
// ReadHeaderTimeout and MaxHeaderBytes, the whole request within
// ReadTimeout, an idle keep-alive connection closed after IdleTimeout.
func newHTTPServer(h http.Handler, b httpBounds) *http.Server {
	if b.ReadHeaderTimeout <= 0 {
		b.ReadHeaderTimeout = 10 * time.Second
	}
	if b.ReadTimeout <= 0 {
		b.ReadTimeout = 30 * time.Second
	}
	if b.IdleTimeout <= 0 {
		b.IdleTimeout = 120 * time.Second
	}
	if b.MaxHeaderBytes <= 0 {
		b.MaxHeaderBytes = 64 << 10
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: b.ReadHeaderTimeout, ReadTimeout: b.ReadTimeout,
		IdleTimeout: b.IdleTimeout, MaxHeaderBytes: b.MaxHeaderBytes}
}
