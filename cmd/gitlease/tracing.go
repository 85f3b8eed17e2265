package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/gitlease/gitlease/app"
	"github.com/gitlease/gitlease/app/tracing"
)

// startTracing sets up traces from OpenTelemetry's environment variables
// (docs/observability.md); nil when they ask for none.
func startTracing(ctx context.Context, logger *slog.Logger) (*tracing.Provider, error) {
	traces, err := tracing.New(ctx, version)
	if err != nil {
		return nil, &configError{Setting: "OTEL_EXPORTER_OTLP_*", Problem: err.Error()}
	}
	if traces != nil {
		logger.Info("exporting traces over OTLP")
	}
	return traces, nil
}

// stopTracing exports the spans still buffered, for at most 5 seconds.
func stopTracing(ctx context.Context, traces *tracing.Provider, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := traces.Shutdown(ctx); err != nil {
		logger.Warn("could not export the last traces", "err", err)
	}
}

// githubTransport is what carries each GitHub call under the limiter:
// serve's metrics, then a client span when tracing is on.
func githubTransport(cfg config, traces *tracing.Provider, metrics *app.Metrics) func(http.RoundTripper) http.RoundTripper {
	apiPath := "/"
	if u, err := url.Parse(cfg.APIURL); err == nil {
		apiPath = u.Path
	}
	return func(next http.RoundTripper) http.RoundTripper {
		return metrics.Transport(traces.GitHubTransport(apiPath, next))
	}
}
