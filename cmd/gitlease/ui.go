package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/app/redeliver"
	"github.com/gitlease/gitlease/app/ui"
	"github.com/gitlease/gitlease/queue"
)

// checkUITokens checks the dashboard's tokens (docs/configuration.md):
// GITLEASE_UI_TOKEN (every action; unset disables /ui) and
// GITLEASE_UI_VIEW_TOKEN (read-only), whose lengths loadConfig checked.
func checkUITokens(c config) error {
	switch {
	case c.UIViewToken != "" && c.UIToken == "":
		return &configError{Setting: "GITLEASE_UI_VIEW_TOKEN", Problem: "needs GITLEASE_UI_TOKEN: the dashboard is disabled without it"}
	case c.UIViewToken != "" && c.UIViewToken == c.UIToken:
		return &configError{Setting: "GITLEASE_UI_VIEW_TOKEN", Problem: "must differ from GITLEASE_UI_TOKEN"}
	}
	return nil
}

// registerDashboard adds /ui to the server: the dashboard, or 404s when
// GITLEASE_UI_TOKEN is unset.
func registerDashboard(e *echo.Echo, cfg config, pool *pgxpool.Pool, store *queue.Store, outbox *outbox.Outbox, rec *redeliver.Reconciler, logger *slog.Logger) error {
	uiCfg := ui.Config{AdminToken: string(cfg.UIToken), ViewToken: string(cfg.UIViewToken), GitHubURL: cfg.WebURL}
	if rec != nil {
		uiCfg.Reconciler = dashboardReconciler{rec}
	}
	dash, err := ui.New(pool, store, outbox, uiCfg, logger)
	if err != nil {
		return err
	}
	dash.Register(e)
	if !dash.Enabled() {
		logger.Info("GITLEASE_UI_TOKEN is not set: the dashboard (/ui) is disabled")
	}
	return nil
}

// dashboardReconciler shows the redelivery reconciler on the dashboard.
type dashboardReconciler struct{ rec *redeliver.Reconciler }

func (d dashboardReconciler) ScanNow(ctx context.Context) error { return d.rec.Run(ctx) }

func (d dashboardReconciler) Status(ctx context.Context) (ui.ReconcileStatus, error) {
	s, err := d.rec.Summary(ctx)
	return ui.ReconcileStatus{LastScan: s.LastScan, Missed: s.Missed, Redelivered: s.Redelivered, Unrecoverable: s.Unrecoverable}, err
}

// devPGHome is where dev keeps its PostgreSQL (data, socket, log): the state
// directory, unless dev runs as root and the postgres OS user, which the
// server runs as, cannot enter the state directory (a checkout under a
// mktemp -d folder or /root). Then it is /var/tmp/gitlease-<hash of the
// state directory>, one per checkout, which that user can reach.
func devPGHome(stateDir string) (string, error) {
	if os.Geteuid() != 0 || othersCanEnter(stateDir) {
		return stateDir, nil
	}
	sum := sha256.Sum256([]byte(stateDir))
	home := filepath.Join("/var/tmp", "gitlease-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(home, 0o755); err != nil {
		return "", fmt.Errorf("create %s for PostgreSQL: %w", home, err)
	}
	if err := os.Chmod(home, 0o755); err != nil {
		return "", fmt.Errorf("open %s to the postgres user: %w", home, err)
	}
	return home, nil
}

// othersCanEnter reports whether every directory from / down to dir is
// searchable by any user (o+x), which is what the postgres user needs.
func othersCanEnter(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// devCommand is how the commands dev prints start gitlease, so they work
// pasted from the directory dev runs in: the running binary's path relative
// to it (bin/gitlease after `make dev`), "gitlease" when that is on PATH,
// else `go run ./cmd/gitlease`.
func devCommand() string {
	exe, err := os.Executable()
	wd, werr := os.Getwd()
	if err == nil && werr == nil {
		if rel, err := filepath.Rel(wd, exe); err == nil && !strings.HasPrefix(rel, "..") {
			return "./" + filepath.ToSlash(rel)
		}
	}
	if _, err := exec.LookPath("gitlease"); err == nil {
		return "gitlease"
	}
	return "go run ./cmd/gitlease"
}

// printDevDashboard ends dev's banner with the dashboard's address and
// token (a dev credential, shown on stdout to whoever ran dev).
func printDevDashboard(w io.Writer, addr, token string) {
	port := addr
	if _, p, err := net.SplitHostPort(addr); err == nil {
		port = p
	}
	fmt.Fprintf(w, `
  dashboard       http://127.0.0.1:%[1]s/ui/  (sign in with the token below)
  dashboard token %[2]s
  The dry run's GitHub writes and GitHub's answers show at http://127.0.0.1:%[1]s/ui/outbox
  and on each item's page.

Ctrl-C stops it.
`, port, token)
}
