// Package tracing owns gitlease's OpenTelemetry set-up: the tracer provider
// and its OTLP exporter, configured by OpenTelemetry's own environment
// variables, and the HTTP instrumentation of the routes gitlease serves
// (server spans) and of its GitHub calls (client spans named by GitHub's
// route templates). Without an OTLP endpoint nothing is set up: New returns
// a nil *Provider, whose methods hand back what they were given unwrapped
// and whose TracerProvider is a no-op one, so tracing then costs nothing.
//
// The spans inside gitlease (a delivery's verification and transaction, an
// outbox row's send) are started by the packages that own that work, from
// the trace.TracerProvider they are configured with.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// DefaultServiceName is service.name unless OTEL_SERVICE_NAME (or
// OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const DefaultServiceName = "gitlease"

// Provider is an OpenTelemetry tracer provider exporting over OTLP. A nil
// *Provider is tracing switched off.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// Enabled reports whether the environment asks for traces: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), OTEL_SDK_DISABLED is not true and
// OTEL_TRACES_EXPORTER is not none.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// New sets up tracing from the environment (docs/observability.md): nil,
// nil when Enabled is false. Otherwise the exporter is OTLP over
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL
// (http/protobuf, the default, or grpc), every other OTEL_EXPORTER_OTLP_*,
// OTEL_BSP_*, OTEL_TRACES_SAMPLER and OTEL_RESOURCE_ATTRIBUTES variable as
// the SDK reads it, service.name DefaultServiceName unless
// OTEL_SERVICE_NAME is set, and service.version version. It also becomes
// the process's global tracer provider, with the W3C trace-context
// propagator. Shutdown flushes it.
func New(ctx context.Context, version string) (*Provider, error) {
	if !Enabled(os.Getenv) {
		return nil, nil
	}
	var client otlptrace.Client
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch protocol {
	case "", "http/protobuf":
		client = otlptracehttp.NewClient()
	case "grpc":
		client = otlptracegrpc.NewClient()
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q is not http/protobuf or grpc", protocol)
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("start the OTLP trace exporter: %w", err)
	}
	// Later options win: the environment's service.name over the default.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(DefaultServiceName), semconv.ServiceVersion(version)),
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("describe this process for traces: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return &Provider{tp: tp}, nil
}

// TracerProvider is p's provider, or a no-op one when p is nil.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil {
		return noop.NewTracerProvider()
	}
	return p.tp
}

// Shutdown exports what is buffered and stops p; nothing when p is nil.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// Handler makes every request h serves a server span named
// "METHOD route" (route is the pattern without the method, e.g. "/webhook"),
// with HTTP semantic-convention attributes; a traceparent header the caller
// sent makes it a child of the caller's span. A nil p returns h.
func (p *Provider) Handler(route string, h http.Handler) http.Handler {
	if p == nil {
		return h
	}
	traced := otelhttp.NewHandler(h, route, otelhttp.WithTracerProvider(p.tp),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + route }))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// otelhttp takes http.route from the pattern, which echo does not set.
		r.Pattern = r.Method + " " + route
		traced.ServeHTTP(w, r)
	})
}

// GitHubTransport makes every request through next a client span named by
// GitHub's route template ("POST /repos/{owner}/{repo}/check-runs"), with
// the response's status code, in the trace of the request's context.
// apiPath is the API's path prefix ("/" on github.com, "/api/v3/" on
// GitHub Enterprise Server), which is not part of a route. A nil p returns
// next.
func (p *Provider) GitHubTransport(apiPath string, next http.RoundTripper) http.RoundTripper {
	if p == nil {
		return next
	}
	if next == nil {
		next = http.DefaultTransport
	}
	routes := newGitHubRoutes(apiPath)
	return otelhttp.NewTransport(next, otelhttp.WithTracerProvider(p.tp),
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()), // nothing of gitlease's trace goes to GitHub
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return routes.name(r) }))
}
