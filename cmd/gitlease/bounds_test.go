package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// startBounded serves a handler that reads the whole body, as the webhook
// does, behind newHTTPServer with bounds b, and returns its address.
func startBounded(t *testing.T, b httpBounds) string {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return // cut off: nothing to answer
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := newHTTPServer(h, b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// closedWithin reports whether the server closed conn before limit,
// writing one byte of trickle every step meanwhile (a slow sender), and
// how long it took.
func closedWithin(conn net.Conn, trickle []byte, step, limit time.Duration) (bool, time.Duration) {
	start := time.Now()
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, conn) // returns when the server closes
		close(closed)
	}()
	for i := 0; time.Since(start) < limit; i++ {
		select {
		case <-closed:
			return true, time.Since(start)
		case <-time.After(step):
		}
		if len(trickle) > 0 {
			_, _ = conn.Write(trickle[i%len(trickle) : i%len(trickle)+1])
		}
	}
	return false, time.Since(start)
}

// TestHTTPServerCutsOffSlowClients: a client sending its body a byte at a
// time, one stalling in its headers, and an idle keep-alive connection are
// each disconnected by the server (docs/http.md); a header block over
// MaxHeaderBytes is refused. Bounds are shortened to keep the test short;
// the limit each waits for is many times the bound, so a slow machine
// does not fail it, while a server without the bound would hold the
// connection for the whole trickle.
func TestHTTPServerCutsOffSlowClients(t *testing.T) {
	t.Parallel()
	const bound = 300 * time.Millisecond
	addr := startBounded(t, httpBounds{ReadHeaderTimeout: bound, ReadTimeout: 2 * bound, IdleTimeout: bound, MaxHeaderBytes: 4 << 10})
	cases := []struct {
		name    string
		opening string // what the client sends first
		trickle string // then a byte of this every 50ms
		keep    bool   // read one answer first, then idle
	}{
		{name: "slow body", opening: "POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n{", trickle: "a"},
		{name: "stalled headers", opening: "POST /webhook HTTP/1.1\r\nHost: x\r\n", trickle: "X"},
		{name: "idle keep-alive", opening: "GET / HTTP/1.1\r\nHost: x\r\n\r\n", keep: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, tc.opening); err != nil {
				t.Fatal(err)
			}
			if tc.keep {
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			// Without the bounds the server would hold the connection for
			// the full 60 s of trickle.
			if ok, took := closedWithin(conn, []byte(tc.trickle), 50*time.Millisecond, 60*time.Second); !ok {
				t.Fatalf("the server still held the connection after %v", took)
			}
		})
	}
	t.Run("headers too large", func(t *testing.T) {
		t.Parallel()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		req.Header.Set("X-Big", strings.Repeat("a", 8<<10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("status %d, want 431", resp.StatusCode)
		}
	})
}

// TestHTTPServerDefaults: the production server carries the bounds of docs/http.md.
func TestHTTPServerDefaults(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler(), httpBounds{})
	got := []any{srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout, srv.MaxHeaderBytes}
	want := []any{10 * time.Second, 30 * time.Second, 120 * time.Second, 64 << 10}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("bound %d = %v, want %v", i, got[i], want[i])
		}
	}
}
