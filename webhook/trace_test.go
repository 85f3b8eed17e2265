package webhook_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gitlease/gitlease/webhook"
)

// TestDeliveryTraces: traced, each delivery of a burst recorded in groups
// gets a verify and a record span under its own request span, and its item
// stores its own record span as trace parent, whichever delivery led the
// group that recorded it.
func TestDeliveryTraces(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var committed atomic.Int32
	opts := defaultOptions()
	opts.handler = webhook.HandlerConfig{GroupSize: 8, Groups: 1, TracerProvider: tp,
		OnGroup: func(_ int, ok bool) {
			if ok {
				committed.Add(1)
			}
		}}
	e := newEnv(t, opts)
	const n = 40
	var rqs []request
	var spans []trace.Span
	for i := range n {
		ctx, server := tp.Tracer("test").Start(context.Background(), "POST /webhook")
		rqs = append(rqs, request{event: "issues", delivery: fmt.Sprintf("traced-%d", i), body: issueOpened(t, i+1), ctx: ctx})
		spans = append(spans, server)
	}
	answers := e.burst(t, rqs)
	for _, s := range spans {
		s.End()
	}
	if committed.Load() == 0 {
		t.Fatal("no group was committed: the burst was recorded one by one")
	}
	servers := map[string]sdktrace.ReadOnlySpan{} // by trace ID
	records := map[string]sdktrace.ReadOnlySpan{} // by entry ID
	verifies := map[string]int{}                  // by trace ID
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "POST /webhook":
			servers[s.SpanContext().TraceID().String()] = s
		case "webhook verify":
			verifies[s.SpanContext().TraceID().String()]++
		case "webhook record":
			for _, a := range s.Attributes() {
				if a.Key == attribute.Key("gitlease.entry_id") {
					records[a.Value.AsString()] = s
				}
			}
		}
	}
	for i, a := range answers {
		if a.Outcome != webhook.OutcomeEnqueued {
			t.Fatalf("delivery %d answered %+v", i, a)
		}
		rs, ok := records[a.EntryID]
		if !ok {
			t.Fatalf("no record span names entry %s", a.EntryID)
		}
		traceID := rs.SpanContext().TraceID().String()
		if sv := servers[traceID]; sv == nil || rs.Parent().SpanID() != sv.SpanContext().SpanID() || verifies[traceID] != 1 {
			t.Errorf("entry %s: its record span is not a child of its request span beside one verify span", a.EntryID)
		}
		want := "00-" + traceID + "-" + rs.SpanContext().SpanID().String() + "-01"
		if got := e.item(t, a.EntryID).TraceParent(); got != want {
			t.Errorf("entry %s stores trace parent %q, want its record span's %q", a.EntryID, got, want)
		}
	}
	if len(records) != n {
		t.Errorf("%d record spans name an entry, want %d", len(records), n)
	}
	// Untraced, an item stores none.
	plain := newEnv(t, defaultOptions())
	_, a := plain.post(t, request{event: "issues", delivery: "plain", body: issueOpened(t, 1)})
	if tp := plain.item(t, a.EntryID).TraceParent(); tp != "" {
		t.Errorf("an untraced delivery's item stores trace parent %q", tp)
	}
}
