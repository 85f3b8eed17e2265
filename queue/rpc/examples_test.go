package rpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/queue/rpc"
)

// The protocol examples under testdata/protocol/examples/ (the wire
// reference is docs/protocol/queue-v2.md) form one scenario
// (entries A, B and C flowing enqueue → lease → renew → recover → completion).
// These tests replay every exchange, on the queue's clock as each file says,
// over both transports, and compare every response field by field.

const examplesDir = "../../testdata/protocol/examples"

type exchange struct {
	At       string          `json:"at"`
	Name     string          `json:"name"`
	Note     string          `json:"note"`
	Request  json.RawMessage `json:"request"`
	Response json.RawMessage `json:"response"`
}

type exampleFile struct {
	Exchanges []exchange `json:"exchanges"`
	Cases     []exchange `json:"cases"`
}

func loadExamples(t *testing.T, name string) []exchange {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(examplesDir, name))
	if err != nil {
		t.Fatalf("read example %s: %v", name, err)
	}
	var f exampleFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("decode example %s: %v", name, err)
	}
	return append(f.Exchanges, f.Cases...)
}

// clock is the queue clock the scenario sets before each exchange.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t *testing.T, rfc3339 string) {
	t.Helper()
	ts, err := time.Parse(time.RFC3339, rfc3339)
	if err != nil {
		t.Fatalf("bad 'at' %q: %v", rfc3339, err)
	}
	c.mu.Lock()
	c.now = ts
	c.mu.Unlock()
}

// ids hands out the entry IDs the scenario names, in order, then random ones.
type ids struct {
	mu   sync.Mutex
	next []uuid.UUID
}

func (g *ids) push(s ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, x := range s {
		g.next = append(g.next, uuid.MustParse(x))
	}
}

func (g *ids) New() uuid.UUID {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.next) == 0 {
		return uuid.New()
	}
	id := g.next[0]
	g.next = g.next[1:]
	return id
}

const (
	entryA = "3f6c1d2e-8a4b-4c9d-b1e7-5a2f9c0d7e18"
	entryB = "9b0e4a71-2c3d-4f58-a6e9-7d1c0b2f3a45"
	entryC = "c47d2e90-6f1a-4b3c-8d25-e0f9a1b7c6d3"
)

// transport sends one JSON-RPC message and returns the raw response (nil
// when none came).
type transport func(t *testing.T, req json.RawMessage) json.RawMessage

type scenario struct {
	clock clock
	ids   ids
	store *queue.Store
	h     *rpc.Handler
}

func newScenario(t *testing.T) *scenario {
	sc := &scenario{}
	sc.store = queue.NewStore(dbtest.New(t), queue.Config{LeaseTTL: 1800 * time.Second, Now: sc.clock.Now, NewID: sc.ids.New})
	sc.h = rpc.NewHandler(sc.store, "0.1.0", nil)
	return sc
}

// setup finishes generations 1 and 2 of issue 43, so C becomes generation 3.
func (sc *scenario) setup(t *testing.T) {
	ctx := context.Background()
	sc.clock.Set(t, "2026-10-01T11:00:00Z")
	for i := 0; i < 2; i++ {
		res, err := sc.store.Enqueue(ctx, queue.EnqueueParams{Dispatch: queue.SubjectDispatch{
			Subject:     &queue.SubjectRef{Kind: "github_issue", ID: "1296269#43"},
			WorkflowRef: "triage", TriggerSource: "setup", RequestedAt: queue.Timestamp{Time: sc.clock.Now()},
		}})
		if err != nil {
			t.Fatalf("setup enqueue: %v", err)
		}
		if _, err := sc.store.Drop(ctx, res.EntryID); err != nil {
			t.Fatalf("setup drop: %v", err)
		}
	}
}

// replay sends each exchange of file (at its clock, or at 12:10 when it has
// none) and compares the response.
func (sc *scenario) replay(t *testing.T, send transport, file string, filter func(exchange) bool) {
	t.Helper()
	for i, ex := range loadExamples(t, file) {
		if filter != nil && !filter(ex) {
			continue
		}
		at := ex.At
		if at == "" {
			at = "2026-10-01T12:10:00Z"
		}
		sc.clock.Set(t, at)
		got := send(t, ex.Request)
		assertJSONEqual(t, file, i, ex, got)
	}
}

func assertJSONEqual(t *testing.T, file string, i int, ex exchange, got json.RawMessage) {
	t.Helper()
	var want, have any
	if string(ex.Response) == "null" || len(ex.Response) == 0 {
		if got != nil {
			t.Errorf("%s[%d] %s: expected no response, got %s", file, i, ex.Note, got)
		}
		return
	}
	if err := json.Unmarshal(ex.Response, &want); err != nil {
		t.Fatalf("%s[%d]: decode expected: %v", file, i, err)
	}
	if err := json.Unmarshal(got, &have); err != nil {
		t.Fatalf("%s[%d] %s%s: response is not JSON: %q", file, i, ex.Name, ex.Note, got)
	}
	// Messages are informative; code and data are the contract. Ours are
	// worded like the reference's, but compare them only where they are.
	if !reflect.DeepEqual(want, have) {
		wb, _ := json.Marshal(want)
		hb, _ := json.Marshal(have)
		t.Errorf("%s[%d] %s%s:\n want %s\n have %s", file, i, ex.Name, ex.Note, wb, hb)
	}
}

// runScenario replays every example file in scenario order.
func runScenario(t *testing.T, sc *scenario, send transport) {
	sc.setup(t)
	sc.ids.push(entryA, entryB, entryC)
	sc.replay(t, send, "enqueue.json", nil)
	sc.replay(t, send, "lease.json", nil)
	sc.replay(t, send, "list.json", nil)
	sc.replay(t, send, "stats.json", nil)
	sc.replay(t, send, "errors.json", func(ex exchange) bool {
		var r struct{ Method string }
		_ = json.Unmarshal(ex.Request, &r)
		return r.Method != "initialize" && ex.Name != "PLUGIN_NOT_INITIALIZED"
	})
	recover := loadExamples(t, "recover.json")
	sc.replay(t, send, "recover.json", func(ex exchange) bool { return ex.At == recover[0].At })
	sc.replay(t, send, "renew.json", nil)
	sc.replay(t, send, "recover.json", func(ex exchange) bool { return ex.At != recover[0].At })
	sc.replay(t, send, "release_pending.json", nil)
	sc.replay(t, send, "completion.json", nil)
	sc.replay(t, send, "hold.json", nil)
	sc.replay(t, send, "release.json", nil)
	sc.replay(t, send, "drop.json", nil)
}

func TestExamplesOverHTTPHandler(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	runScenario(t, sc, func(t *testing.T, req json.RawMessage) json.RawMessage {
		return sc.h.ServeJSONRPC(context.Background(), req)
	})
}

// stdioPeer drives a StdioSession as a plugin host would: one line per
// message, responses read back one line each.
type stdioPeer struct {
	session *rpc.StdioSession
	in      *io.PipeWriter
	out     *bufio.Reader
	done    chan error
}

func newStdioPeer(t *testing.T, h *rpc.Handler) *stdioPeer {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &stdioPeer{session: rpc.NewStdioSession(h, outW), in: inW, out: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		err := p.session.Serve(context.Background(), inR)
		outW.Close()
		p.done <- err
	}()
	t.Cleanup(func() { inW.Close() })
	return p
}

func (p *stdioPeer) send(t *testing.T, req json.RawMessage) json.RawMessage {
	t.Helper()
	var compact map[string]any
	if err := json.Unmarshal(req, &compact); err != nil {
		t.Fatalf("bad request: %v", err)
	}
	line, _ := json.Marshal(compact)
	if _, err := p.in.Write(append(line, '\n')); err != nil {
		t.Fatalf("write request: %v", err)
	}
	if _, isRequest := compact["id"]; !isRequest || compact["method"] == "exit" {
		return nil
	}
	resp, err := p.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	return resp
}

func TestExamplesOverStdio(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	peer := newStdioPeer(t, sc.h)
	// Before initialize: queue calls are refused, and initialize needs a project.
	sc.replay(t, peer.send, "errors.json", func(ex exchange) bool {
		return ex.Name == "PLUGIN_NOT_INITIALIZED" || ex.Name == "PROJECT_BINDING_MISMATCH"
	})
	init := loadExamples(t, "initialize.json")
	sc.clock.Set(t, "2026-10-01T11:59:00Z")
	assertJSONEqual(t, "initialize.json", 0, init[0], peer.send(t, init[0].Request))
	if root := peer.session.ProjectRoot(); root != "/srv/gitlease" {
		t.Fatalf("session bound project %q, want /srv/gitlease", root)
	}
	runScenario(t, sc, peer.send)
	// The rest of the lifecycle: initialized, $/ping, health/check, shutdown, exit.
	for i, ex := range init[1:] {
		assertJSONEqual(t, "initialize.json", i+1, ex, peer.send(t, ex.Request))
	}
	select {
	case err := <-peer.done:
		if err != nil {
			t.Fatalf("session ended with %v after exit, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("session did not end after exit")
	}
}
