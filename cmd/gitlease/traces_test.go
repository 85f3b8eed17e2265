package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/webhook"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each export with
// the collector's own protobuf types and keeps the spans.
type otlpReceiver struct {
	mu      sync.Mutex
	spans   []*tracepb.Span
	service []string // service.name of each export's resources
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				o.service = append(o.service, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (o *otlpReceiver) all() []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*tracepb.Span(nil), o.spans...)
}

func intAttr(s *tracepb.Span, key string) int64 {
	return attr(s, key).GetIntValue()
}

func strAttr(s *tracepb.Span, key string) string {
	return attr(s, key).GetStringValue()
}

// attr returns the value of s's attribute key, nil (whose getters give the
// zero value) when s has none.
func attr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.GetValue()
		}
	}
	return nil
}

// TestOneTracePerDelivery runs serve exporting traces to an in-process OTLP
// receiver: one delivery of an issue is one trace holding the POST /webhook
// server span, its verify and record children, the outbox sends it caused
// and the worker's command (children of the record span) and their GitHub
// client spans, named by route template with their status codes
// (provisioning's branch and pull request, the check run's creation and
// updates, the command's item token); the command sees its span as
// TRACEPARENT; a /rpc call is a server span of its own. It runs against
// github.com and GitHub Enterprise Server.
func TestOneTracePerDelivery(t *testing.T) {
	t.Parallel()
	forEachGitHub(t, testOneTracePerDelivery)
}

func testOneTracePerDelivery(t *testing.T, gh *githubtest.Server) {
	gh.AddRepo("octocat", "Hello-World", 1296269, "main", true)
	gh.AddInstallation(2311213, "octocat/Hello-World")
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)

	seen := filepath.Join(t.TempDir(), "traceparent")
	dbURL := dbtest.URL(t)
	bin := buildGitlease(t)
	env := append(append(devTestEnv(), githubEnv(gh)...), "DATABASE_URL="+dbURL, "PORT=0", "GITHUB_WEBHOOK_SECRET=whsec-0123456789abcdef",
		"GITLEASE_RPC_TOKEN=rpc-token-0123456789", "GITLEASE_WORKER_SLOTS=1", "GITLEASE_GITHUB_WRITES_PER_SEC=0",
		"GITLEASE_WORKER_EXEC=printf %s \"$TRACEPARENT\" > "+seen, "GITLEASE_REDELIVER_INTERVAL=0",
		"GITLEASE_WORKER_SANDBOX=none", // the command writes into the test's directory, which a sandbox hides
		"OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_SERVICE_NAME=gitlease-test", "OTEL_BSP_SCHEDULE_DELAY=100")
	stop, out := startBinary(t, bin, env, "serve")
	base := serveURL(t, out)

	raw, err := os.ReadFile("../../testdata/payloads/issues-opened.json")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/webhook", bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", "trace-1")
	req.Header.Set("X-Hub-Signature-256", webhook.Sign([]byte("whsec-0123456789abcdef"), raw))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delivery answered %d", resp.StatusCode)
	}
	rpcReq, _ := http.NewRequest(http.MethodPost, base+"/rpc", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"queue/stats"}`))
	rpcReq.Header.Set("Authorization", "Bearer rpc-token-0123456789")
	if resp, err := http.DefaultClient.Do(rpcReq); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}

	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if !gh.Wait(60*time.Second, func() bool {
		var finished, pending int
		_ = pool.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM work_items WHERE status = 'completed'),
			(SELECT count(*) FROM outbox WHERE status <> 'done')`).Scan(&finished, &pending)
		return finished == 1 && pending == 0
	}) {
		t.Fatalf("the item did not complete and its GitHub writes drain within 60s\n%s", out.String())
	}
	if err := stop(); err != nil { // flushes the spans still buffered
		t.Fatal(err)
	}

	spans := recv.all()
	byID := map[string]*tracepb.Span{}
	var server *tracepb.Span
	for _, s := range spans {
		byID[hex.EncodeToString(s.SpanId)] = s
		if s.Name == "POST /webhook" && s.Kind == tracepb.Span_SPAN_KIND_SERVER {
			if server != nil {
				t.Fatal("two POST /webhook spans for one delivery")
			}
			server = s
		}
	}
	if server == nil {
		t.Fatalf("no POST /webhook server span among %d spans", len(spans))
	}
	if len(server.ParentSpanId) != 0 || intAttr(server, "http.response.status_code") != http.StatusAccepted {
		t.Errorf("POST /webhook span: parent %x, status %d; want a root answered 202", server.ParentSpanId, intAttr(server, "http.response.status_code"))
	}
	traceID := server.TraceId
	parentOf := func(s *tracepb.Span) *tracepb.Span { return byID[hex.EncodeToString(s.ParentSpanId)] }
	var inTrace []*tracepb.Span
	for _, s := range spans {
		if bytes.Equal(s.TraceId, traceID) {
			inTrace = append(inTrace, s)
		}
	}
	named := func(name string) []*tracepb.Span {
		var out []*tracepb.Span
		for _, s := range inTrace {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	var record *tracepb.Span
	for _, name := range []string{"webhook verify", "webhook record"} {
		got := named(name)
		if len(got) != 1 || parentOf(got[0]) != server {
			t.Fatalf("%d %q spans in the delivery's trace, want 1 child of POST /webhook", len(got), name)
		}
		record = got[0]
	}
	// Every outbox send the delivery caused, and the worker's command, is a
	// child of its record span; every GitHub call a child of a send or of
	// the command (its item token).
	sends := map[string]int{}
	calls := map[string][]int64{}
	var command *tracepb.Span
	for _, s := range inTrace {
		switch p := parentOf(s); {
		case strings.HasPrefix(s.Name, "outbox send "):
			if p != record {
				t.Errorf("%s span's parent is %v, want the record span", s.Name, p.GetName())
			}
			sends[strings.TrimPrefix(s.Name, "outbox send ")]++
		case s.Name == "worker command":
			if p != record || command != nil {
				t.Errorf("worker command span with parent %v (another before: %v), want one child of the record span", p.GetName(), command != nil)
			}
			command = s
		case s.Kind == tracepb.Span_SPAN_KIND_CLIENT:
			if p == nil || (!strings.HasPrefix(p.Name, "outbox send ") && p.Name != "worker command") {
				t.Errorf("GitHub call %s has parent %v, want an outbox send or the worker command", s.Name, p.GetName())
			}
			calls[s.Name] = append(calls[s.Name], intAttr(s, "http.response.status_code"))
		}
	}
	if command == nil {
		t.Fatal("no worker command span in the delivery's trace")
	}
	if sends["provision"] != 1 || sends["check_run"] < 2 {
		t.Errorf("outbox sends in the trace: %v; want 1 provision and the check run's creation and updates", sends)
	}
	for route, status := range map[string]int64{
		"POST /repos/{owner}/{repo}/git/refs":                     http.StatusCreated,
		"POST /repos/{owner}/{repo}/pulls":                        http.StatusCreated,
		"POST /repos/{owner}/{repo}/check-runs":                   http.StatusCreated,
		"PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}":   http.StatusOK,
		"POST /app/installations/{installation_id}/access_tokens": http.StatusCreated,
	} {
		if got := calls[route]; len(got) == 0 || got[0] != status {
			t.Errorf("GitHub calls %s in the trace answered %v, want %d", route, got, status)
		}
	}
	if t.Failed() {
		t.Logf("GitHub calls in the trace: %v", calls)
	}

	// The worker's command ran inside the delivery's trace.
	tp, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("00-%x-%x-01", traceID, command.SpanId); string(tp) != want {
		t.Errorf("the command saw TRACEPARENT %q, want its worker command span's %s", tp, want)
	}

	// /rpc is a server span of its own trace; the service is named as set.
	rpcSpans := 0
	for _, s := range spans {
		if s.Name == "POST /rpc" && s.Kind == tracepb.Span_SPAN_KIND_SERVER && !bytes.Equal(s.TraceId, traceID) {
			rpcSpans++
		}
	}
	if rpcSpans != 1 {
		t.Errorf("%d POST /rpc server spans, want 1", rpcSpans)
	}
	// Its call is a child span named by the JSON-RPC method.
	statsCalls := 0
	for _, s := range spans {
		if s.Name == "queue/stats" && strAttr(s, "rpc.method") == "queue/stats" && strAttr(s, "rpc.system") == "jsonrpc" {
			for _, p := range spans {
				if p.Name == "POST /rpc" && bytes.Equal(p.SpanId, s.ParentSpanId) {
					statsCalls++
				}
			}
		}
	}
	if statsCalls != 1 {
		t.Errorf("%d queue/stats spans under POST /rpc, want 1", statsCalls)
	}
	for _, name := range recv.service {
		if name != "gitlease-test" {
			t.Errorf("service.name %q, want OTEL_SERVICE_NAME's gitlease-test", name)
		}
	}
	// Log lines inside the trace name it.
	if !strings.Contains(out.String(), fmt.Sprintf(`"trace_id":"%x"`, traceID)) {
		t.Errorf("no log line carries trace_id %x", traceID)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("the delivery's trace:\n%s", traceTree(inTrace, server, 0))
	}
}

// traceTree prints the spans under root, children in start order, as
// docs/observability.md shows a trace.
func traceTree(spans []*tracepb.Span, root *tracepb.Span, depth int) string {
	var b strings.Builder
	d := time.Duration(root.EndTimeUnixNano - root.StartTimeUnixNano)
	fmt.Fprintf(&b, "%s%s (%s", strings.Repeat("  ", depth), root.Name, d.Round(10*time.Microsecond))
	if c := intAttr(root, "http.response.status_code"); c != 0 {
		fmt.Fprintf(&b, ", %d", c)
	}
	b.WriteString(")\n")
	var kids []*tracepb.Span
	for _, s := range spans {
		if bytes.Equal(s.ParentSpanId, root.SpanId) {
			kids = append(kids, s)
		}
	}
	slices.SortFunc(kids, func(x, y *tracepb.Span) int { return cmp.Compare(x.StartTimeUnixNano, y.StartTimeUnixNano) })
	for _, k := range kids {
		b.WriteString(traceTree(spans, k, depth+1))
	}
	return b.String()
}
