package app

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestLogHandlerTraceIDs: a line logged inside a trace carries its
// trace_id and span_id; one logged outside any carries neither.
func TestLogHandlerTraceIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(LogHandler{Handler: slog.NewJSONHandler(&buf, nil)})
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	logger.InfoContext(ctx, "inside")
	logger.InfoContext(context.Background(), "outside")
	var lines []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if lines[0]["trace_id"] != tid.String() || lines[0]["span_id"] != sid.String() {
		t.Errorf("line inside the trace: %v", lines[0])
	}
	if _, ok := lines[1]["trace_id"]; ok {
		t.Errorf("line outside any trace: %v", lines[1])
	}
}
