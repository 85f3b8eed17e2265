package app

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"
)

// requestIDKey carries a request's ID in its context.
type requestIDKey struct{}

// requestID returns the request ID stored in ctx, or "".
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// LogHandler wraps a slog.Handler so that every record logged with a
// request's context (InfoContext and friends) carries its request_id, and
// every record logged inside a trace (a context holding a valid span) its
// trace_id and span_id.
type LogHandler struct{ slog.Handler }

// Handle implements slog.Handler.
func (h LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := requestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h LogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return LogHandler{h.Handler.WithAttrs(as)}
}

// WithGroup implements slog.Handler.
func (h LogHandler) WithGroup(name string) slog.Handler { return LogHandler{h.Handler.WithGroup(name)} }

// requestLog gives every request an ID (the caller's X-Request-Id when it
// sent a sane one), echoes it in the response, puts it in the request's
// context for log lines, and logs the request once it is answered, except
// on the quiet routes (probes, and routes whose handler logs its own line).
//
// A new ID is this process's random prefix and a counter: unique, and
// without a read of the system's random source per request.
func requestLog(logger *slog.Logger, quiet map[string]bool) echo.MiddlewareFunc {
	prefix := uuid.NewString()[:8] + "-"
	var n atomic.Uint64
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			id := req.Header.Get(echo.HeaderXRequestID)
			if id == "" || len(id) > 128 {
				id = prefix + strconv.FormatUint(n.Add(1), 10)
			}
			c.Response().Header().Set(echo.HeaderXRequestID, id)
			ctx := context.WithValue(req.Context(), requestIDKey{}, id)
			c.SetRequest(req.WithContext(ctx))
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			if !quiet[c.Path()] {
				logger.LogAttrs(ctx, slog.LevelInfo, "http request",
					slog.String("method", req.Method), slog.String("route", c.Path()),
					slog.Int("status", c.Response().Status), slog.Duration("duration", time.Since(start)))
			}
			return nil
		}
	}
}
