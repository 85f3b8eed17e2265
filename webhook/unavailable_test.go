package webhook_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/db"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/webhook"
)

// fastEnough is how long a 503 may take: the handler's 2 s transaction
// timeout plus slack for a loaded test machine.
const fastEnough = 3 * time.Second

// poolAt returns a pool that connects to addr, closed when tb ends.
func poolAt(tb testing.TB, connString string) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		tb.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// expect503 posts a fresh delivery and wants a quick 503.
func expect503(t *testing.T, e *testEnv, delivery string) {
	t.Helper()
	start := time.Now()
	status, resp := e.post(t, request{event: "issues", delivery: delivery, body: payload(t, "issues-opened")})
	took := time.Since(start)
	if status != http.StatusServiceUnavailable || resp.Error == "" || resp.Outcome != "" {
		t.Fatalf("answer %d %+v, want 503", status, resp)
	}
	if took > fastEnough {
		t.Fatalf("503 took %s, want under %s", took, fastEnough)
	}
}

// TestDatabaseUnavailable: with no database to talk to, a delivery is
// answered 503 quickly, whichever way the database is gone.
func TestDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	t.Run("dead port", func(t *testing.T) {
		t.Parallel()
		e := newEnvOn(t, poolAt(t, "postgres://postgres@127.0.0.1:1/gitlease?sslmode=disable"), defaultOptions())
		expect503(t, e, "dead-port")
	})
	t.Run("server that never answers", func(t *testing.T) {
		t.Parallel()
		ln := blackhole(t)
		e := newEnvOn(t, poolAt(t, "postgres://postgres@"+ln+"/gitlease?sslmode=disable"), defaultOptions())
		expect503(t, e, "blackhole")
	})
	t.Run("burst to a server that never answers", func(t *testing.T) {
		// Deliveries waiting for a group wait at most the timeout, and the
		// group's transaction takes at most as long again.
		t.Parallel()
		ln := blackhole(t)
		opts := defaultOptions()
		opts.handler = webhook.HandlerConfig{Timeout: 500 * time.Millisecond, GroupSize: 4, Groups: 1}
		e := newEnvOn(t, poolAt(t, "postgres://postgres@"+ln+"/gitlease?sslmode=disable"), opts)
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() {
				start := time.Now()
				status, resp := e.post(t, request{event: "issues", delivery: "burst-" + strconv.Itoa(i), body: issueOpened(t, i+1)})
				if took := time.Since(start); status != http.StatusServiceUnavailable || resp.Outcome != "" || took > 2*time.Second {
					t.Errorf("delivery %d: %d %+v after %s, want 503 within 2s", i, status, resp, took)
				}
			})
		}
		wg.Wait()
	})
	t.Run("read-only server", func(t *testing.T) {
		// A standby, or a primary set read-only: db.Open's pool refuses
		// it on connect, and a pool that does not check gets SQLSTATE
		// 25006 on the first write. Both are 503, never 500.
		t.Parallel()
		cfg, err := db.PoolConfig(dbtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
		unchecked := cfg.Copy()
		unchecked.ConnConfig.ValidateConnect = nil
		for name, c := range map[string]*pgxpool.Config{"checked-on-connect": cfg, "unchecked": unchecked} {
			pool, err := db.Open(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			expect503(t, newEnvOn(t, pool, defaultOptions()), "read-only-"+name)
		}
	})
	t.Run("closed pool", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.New(t)
		e := newEnvOn(t, pool, defaultOptions())
		if status, _ := e.post(t, request{event: "issues", delivery: "before", body: payload(t, "issues-opened")}); status != 202 {
			t.Fatalf("before close: %d", status)
		}
		pool.Close()
		expect503(t, e, "after")
	})
}

// TestDatabaseRecovers: the database goes away mid-test (its connections
// are cut and new ones refused) and comes back; the handler answers 503
// meanwhile, stores nothing, and works again by itself.
func TestDatabaseRecovers(t *testing.T) {
	t.Parallel()
	direct := dbtest.New(t)
	cc := direct.Config().ConnConfig
	proxy := newProxy(t, net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))))
	cfg := direct.Config().Copy()
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(proxy.port())
	cfg.ConnConfig.Fallbacks = nil
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := newEnvOn(t, pool, defaultOptions())
	check := &testEnv{pool: direct} // reads the database around the proxy

	if status, _ := e.post(t, request{event: "ping", delivery: "up", body: payload(t, "ping")}); status != 200 {
		t.Fatalf("with the database up: %d", status)
	}
	proxy.setUp(false)
	expect503(t, e, "down")
	expect503(t, e, "down") // GitHub's redelivery, still down
	if n := check.count(t, "deliveries"); n != 1 {
		t.Fatalf("%d deliveries stored, want only the first", n)
	}
	proxy.setUp(true)
	var resp webhook.Response
	waitFor(t, 10*time.Second, "recovery", func() error {
		var status int
		status, resp = e.post(t, request{event: "issues", delivery: "down", body: payload(t, "issues-opened")})
		if status != http.StatusAccepted {
			return errors.New(http.StatusText(status))
		}
		return nil
	})
	if resp.Outcome != webhook.OutcomeEnqueued {
		t.Fatalf("after recovery: %+v", resp)
	}
	if d := check.delivery(t, "down"); d.Attempts != 1 {
		t.Errorf("attempts %d: arrivals during the outage were stored", d.Attempts)
	}
}

// blackhole returns the address of a listener that accepts connections and
// never says a word, like a server behind a dead network path.
func blackhole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// proxy is a TCP proxy to Postgres that can be switched off: then it cuts
// every connection and refuses new ones.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	up     bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, up: true, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.setUp(false)
		p.wg.Wait()
	})
	return p
}

func (p *proxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *proxy) setUp(up bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = up
	if !up {
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		up := p.up
		p.mu.Unlock()
		if !up {
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			io.Copy(dst, src)
			dst.Close()
			src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(server, client)
		go pipe(client, server)
	}
}

// TestOnAnswer: every answer is reported once, for metrics.
func TestOnAnswer(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	opts := defaultOptions()
	opts.handler.OnAnswer = func(outcome string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, outcome)
	}
	e := newEnv(t, opts)
	dead := newEnvOn(t, poolAt(t, "postgres://postgres@127.0.0.1:1/gitlease?sslmode=disable"), opts)
	body := payload(t, "issues-opened")
	e.post(t, request{event: "issues", delivery: "a", body: body})
	e.post(t, request{event: "issues", delivery: "a", body: body})
	e.post(t, request{event: "issues", delivery: "b", body: body, secret: "wrong"})
	dead.post(t, request{event: "issues", delivery: "c", body: body})
	want := []string{"enqueued", "replay", "rejected", "unavailable"}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("answers %v, want %v", got, want)
	}
}
