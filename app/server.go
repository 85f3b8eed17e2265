// Package app is gitlease's HTTP server: the router the rooms below it
// register on (the webhook intake, /setup and /ui are added by cmd), /rpc
// behind its bearer token, health, readiness and the Prometheus metrics,
// each request with a request ID and one log line. It owns no table and no
// logic of the rooms it serves. See docs/http.md and docs/metrics.md.
package app

import (
	"context"
	"crypto/subtle"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/gitlease/gitlease/app/tracing"
	"github.com/gitlease/gitlease/db"
	"github.com/gitlease/gitlease/queue/rpc"
)

// maxRPCBody bounds a /rpc request body.
const maxRPCBody = 10 << 20

// ServerConfig configures the HTTP surface.
type ServerConfig struct {
	// RPCToken is the bearer token of /rpc that may call every method.
	RPCToken Secret
	// RPCWorkerToken is the bearer token of /rpc that may call only what
	// a worker needs (rpc.WorkerMethod). With neither token /rpc is
	// disabled.
	RPCWorkerToken Secret
	// SelfLoggedRoutes are routes whose handler writes the one log line of
	// each request itself, with its status (the webhook intake's delivery
	// line): the request log writes none for them.
	SelfLoggedRoutes []string
	// Tracing, if set, makes every /rpc call a server span.
	Tracing *tracing.Provider
}

// Secret is a credential that never prints: slog and fmt show it redacted.
type Secret string

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// String implements fmt.Stringer.
func (Secret) String() string { return "[redacted]" }

// Server is gitlease's HTTP surface.
type Server struct {
	cfg    ServerConfig
	pool   *pgxpool.Pool
	rpc    *rpc.Handler
	logger *slog.Logger
	echo   *echo.Echo
}

// NewServer builds the routes. Extra routes (webhook, metrics) are added by
// the caller through Echo.
func NewServer(cfg ServerConfig, pool *pgxpool.Pool, rpcHandler *rpc.Handler, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	s := &Server{cfg: cfg, pool: pool, rpc: rpcHandler, logger: logger, echo: e}
	quiet := map[string]bool{"/healthz": true, "/metrics": true} // probes would drown the log
	for _, r := range cfg.SelfLoggedRoutes {
		quiet[r] = true
	}
	e.Use(requestLog(logger, quiet))
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", s.readyz)
	var rpcMiddleware []echo.MiddlewareFunc
	if cfg.Tracing != nil {
		rpcMiddleware = append(rpcMiddleware, echo.WrapMiddleware(func(h http.Handler) http.Handler { return cfg.Tracing.Handler("/rpc", h) }))
	}
	e.POST("/rpc", s.handleRPC, rpcMiddleware...)
	return s
}

// Echo exposes the router so other components can add routes.
func (s *Server) Echo() *echo.Echo { return s.echo }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// readyz answers 200 only when a server that takes writes answers and the
// schema is current. Every answer says how durable an acknowledged commit
// is, once a server has told it.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	srv, err := db.ReadServer(ctx, s.pool)
	if err != nil && !db.ReadOnly(err) && ctx.Err() == nil {
		// The pool's connection may be one its server cut (it died, or a
		// failover is under way): a fresh one says why.
		srv, err = db.ReadServerFresh(ctx, s.pool.Config())
	}
	switch {
	case err != nil && db.ReadOnly(err):
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable",
			"reason": "no writable primary: the database servers that answer are read-only (standbys, or a demoted primary)"})
	case err != nil:
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "database unreachable"})
	case srv.ReadOnly:
		// Only a pool whose check on connect was skipped gets here.
		return c.JSON(http.StatusServiceUnavailable, map[string]any{"status": "unavailable",
			"reason": "no writable primary: the database server is read-only (a standby, or a demoted primary)", "durability": srv.Durability})
	}
	st, err := db.Status(ctx, s.pool)
	switch {
	case err != nil:
		return c.JSON(http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "reason": "database unreachable", "durability": srv.Durability})
	case !st.Ready():
		return c.JSON(http.StatusServiceUnavailable, map[string]any{
			"status": "unavailable", "reason": "schema behind: run gitlease migrate",
			"schema_version": st.Current, "required_version": st.Target, "durability": srv.Durability,
		})
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "ready", "schema_version": st.Current, "durability": srv.Durability})
}

// handleRPC serves the queue JSON-RPC API behind a bearer token. With the
// worker token, a body naming any method a worker does not need is refused
// whole (403) before any of it runs.
func (s *Server) handleRPC(c echo.Context) error {
	if s.cfg.RPCToken == "" && s.cfg.RPCWorkerToken == "" {
		return c.JSON(http.StatusNotFound, map[string]string{"error": "/rpc is disabled: set GITLEASE_RPC_TOKEN or GITLEASE_RPC_WORKER_TOKEN to enable it"})
	}
	auth := c.Request().Header.Get(echo.HeaderAuthorization)
	token, ok := strings.CutPrefix(auth, "Bearer ")
	full := ok && tokenIs(token, s.cfg.RPCToken)
	worker := ok && !full && tokenIs(token, s.cfg.RPCWorkerToken)
	if !full && !worker {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="gitlease"`)
		return c.JSON(http.StatusUnauthorized, map[string]string{"error": "missing or wrong bearer token"})
	}
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, maxRPCBody+1))
	if err != nil {
		return c.JSON(http.StatusBadRequest, map[string]string{"error": "could not read the request body"})
	}
	if len(body) > maxRPCBody {
		return c.JSON(http.StatusRequestEntityTooLarge, map[string]string{"error": "request body larger than 10 MiB"})
	}
	if worker {
		for _, m := range rpc.PayloadMethods(body) {
			if !rpc.WorkerMethod(m) {
				return c.JSON(http.StatusForbidden, map[string]string{"error": "the worker token (GITLEASE_RPC_WORKER_TOKEN) may not call " + strconv.Quote(cut(m, 128)) + "; nothing in this request ran"})
			}
		}
	}
	out := s.rpc.ServeJSONRPC(c.Request().Context(), body)
	if out == nil {
		return c.NoContent(http.StatusNoContent)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, out)
}

// tokenIs compares a presented token with a configured one in constant
// time; an unconfigured token matches nothing.
func tokenIs(got string, want Secret) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// cut shortens s to at most n bytes, for what an answer echoes of a request.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
