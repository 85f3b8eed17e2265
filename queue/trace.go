package queue

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The trace context an item carries (docs/observability.md): the W3C
// traceparent of the span that enqueued it, kept in work_items.trace_parent
// so that what the item causes later (outbox writes, the worker's command)
// joins the same trace on whichever instance runs it.

// TraceParent returns the W3C traceparent of ctx's span, "" when ctx holds
// none (tracing off), without formatting anything then.
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// WithTraceParent returns ctx with the span traceParent names as its remote
// parent, so spans started from it join that trace; ctx itself when
// traceParent is empty or malformed.
func WithTraceParent(ctx context.Context, traceParent string) context.Context {
	if traceParent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceParent})
}
