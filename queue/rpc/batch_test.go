package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// TestBatchCap: a batch of up to MaxBatch requests is answered call by call;
// a longer one gets a single -32600 response and none of its calls run.
func TestBatchCap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		size    int
		refused bool
	}{
		{1, false},
		{MaxBatch - 1, false},
		{MaxBatch, false},
		{MaxBatch + 1, true},
		{10 * MaxBatch, true},
	} {
		t.Run(fmt.Sprint(tc.size), func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			route := func(ctx context.Context, method string, params json.RawMessage) (any, *Error, bool) {
				calls.Add(1)
				return echoRouter(ctx, method, params)
			}
			msgs := make([]string, tc.size)
			for i := range msgs {
				msgs[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"m"}`, i)
			}
			out := handlePayload(context.Background(), []byte("["+strings.Join(msgs, ",")+"]"), route)

			if tc.refused {
				var r response
				if err := json.Unmarshal(out, &r); err != nil {
					t.Fatalf("refused batch: want one response object, got %s", out)
				}
				if r.Error == nil || r.Error.Code != CodeInvalidRequest || string(r.ID) != "null" {
					t.Fatalf("refused batch: got %s, want a -32600 error with id null", out)
				}
				if n := calls.Load(); n != 0 {
					t.Fatalf("refused batch ran %d calls, want 0", n)
				}
				return
			}
			var rs []response
			if err := json.Unmarshal(out, &rs); err != nil {
				t.Fatalf("batch of %d: want an array of responses, got %.200s", tc.size, out)
			}
			if len(rs) != tc.size || calls.Load() != int64(tc.size) {
				t.Fatalf("batch of %d: %d responses, %d calls", tc.size, len(rs), calls.Load())
			}
			for _, r := range rs {
				if r.Error != nil {
					t.Fatalf("batch of %d: response %s failed: %v", tc.size, r.ID, r.Error)
				}
			}
		})
	}
}
