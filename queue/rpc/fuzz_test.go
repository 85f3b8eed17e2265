package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// echoRouter answers every call with its method, so the fuzzers exercise the
// framing alone.
func echoRouter(_ context.Context, method string, _ json.RawMessage) (any, *Error, bool) {
	if method == "fail" {
		return nil, errorf(CodeInternal, "failed"), false
	}
	return map[string]string{"method": method}, nil, false
}

// FuzzPayload: any HTTP body gets either no response or valid JSON-RPC
// response JSON, never a panic.
func FuzzPayload(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"queue/stats"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]`,
		`{"jsonrpc":"2.0","method":"n"}`, `[]`, `{`, `null`, `"x"`, `{"id":{},"jsonrpc":"2.0","method":"m"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out := handlePayload(context.Background(), body, echoRouter)
		if out == nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("response is not JSON: %q", out)
		}
		var one response
		var many []response
		if json.Unmarshal(out, &one) != nil && json.Unmarshal(out, &many) != nil {
			t.Fatalf("response is neither a response nor a batch: %q", out)
		}
	})
}

// FuzzStdioFrames: any byte stream on stdin yields only complete JSON lines
// on stdout, and the session ends at EOF.
func FuzzStdioFrames(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$/ping\"}\n"))
	f.Add([]byte("garbage\n{\n \"jsonrpc\": \"2.0\",\n \"id\": 2,\n \"method\": \"$/ping\"\n}\n"))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"exit\"}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		s := NewStdioSession(&Handler{methods: map[string]handlerFunc{}}, &out)
		if err := s.Serve(context.Background(), io.NopCloser(bytes.NewReader(in))); err != nil {
			t.Fatalf("serve: %v", err)
		}
		for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Fatalf("output line is not JSON: %q", line)
			}
		}
	})
}

// FuzzPayloadMethods: for any HTTP body, every method the handler would
// route is one PayloadMethods lists, so a body it finds only allowed
// methods in cannot run another (the worker token's check).
func FuzzPayloadMethods(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"queue/stats"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"queue/v2/lease"},{"jsonrpc":"2.0","id":2,"method":"queue/drop"}]`,
		`{"jsonrpc":"2.0","id":1,"method":"queue/stats","method":"queue/drop"}`,
		`{"jsonrpc":"2.0","id":1,"method":"queue/\u0064rop"}`, `[[{"method":"x"}]]`, `[]`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		listed := map[string]bool{}
		for _, m := range PayloadMethods(body) {
			listed[m] = true
		}
		handlePayload(context.Background(), body, func(ctx context.Context, method string, params json.RawMessage) (any, *Error, bool) {
			if !listed[method] {
				t.Fatalf("%q ran but PayloadMethods(%q) does not list it", method, body)
			}
			return echoRouter(ctx, method, params)
		})
	})
}
