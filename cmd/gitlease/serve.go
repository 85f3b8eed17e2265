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
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/app"
	"github.com/gitlease/gitlease/db"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/queue/rpc"
)

func rpcManifest() rpc.Manifest { return rpc.NewManifest(version) }

// openPool connects to Postgres and checks it answers.
func openPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &configError{Setting: "DATABASE_URL", Problem: "not a valid Postgres connection string"}
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to Postgres at %s: %w", cfg.ConnConfig.Host, err)
	}
	return pool, nil
}

func runMigrate(ctx context.Context, args []string, stderr io.Writer, logger *slog.Logger) error {
	cfg, err := loadConfig("migrate", args, true, stderr, "DATABASE_URL")
	if err != nil {
		return err
	}
	pool, err := openPool(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	n, err := db.Migrate(ctx, pool)
	if err != nil {
		return err
	}
	logger.Info("migrations applied", "count", n)
	return nil
}

func runServe(ctx context.Context, args []string, stderr io.Writer, logger *slog.Logger) error {
	cfg, err := loadConfig("serve", args, true, stderr, "DATABASE_URL")
	if err != nil {
		return err
	}
	return serve(ctx, cfg, logger, nil)
}

// serve runs the HTTP server until ctx ends, then drains it. ready, if not
// nil, is called with the bound address once the server listens.
func serve(ctx context.Context, cfg config, logger *slog.Logger, ready func(addr string)) error {
	pool, err := openPool(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if cfg.Migrate {
		n, err := db.Migrate(ctx, pool)
		if err != nil {
			return err
		}
		logger.Info("migrations applied", "count", n)
	}
	store := queue.NewStore(pool, queue.Config{LeaseTTL: cfg.LeaseTTL})
	handler := rpc.NewHandler(store, version, logger)
	srv := app.NewServer(app.ServerConfig{RPCToken: cfg.RPCToken}, pool, handler, logger)
	if cfg.RPCToken == "" {
		logger.Warn("GITLEASE_RPC_TOKEN is not set: /rpc is disabled")
	}

	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen on port %d: %w", cfg.Port, err)
	}
	httpSrv := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(ln) }()
	logger.Info("serving", "addr", ln.Addr().String(), "version", version)
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := httpSrv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("drain http server: %w", err)
	}
	return nil
}

func runPlugin(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, logger *slog.Logger) error {
	cfg, err := loadConfig("plugin", args, true, stderr, "DATABASE_URL")
	if err != nil {
		return err
	}
	pool, err := openPool(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := db.Migrate(ctx, pool); err != nil {
		return err
	}
	store := queue.NewStore(pool, queue.Config{LeaseTTL: cfg.LeaseTTL})
	session := rpc.NewStdioSession(rpc.NewHandler(store, version, logger), stdout)
	return session.Serve(ctx, stdin)
}

var _ = os.Stdout
