package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/queue/rpc"
)

const clientToken = "client-test-token"

// bearer serves h at /rpc as gitlease's server does: a bearer token is
// required (401 without it), a body of only notifications gets 204.
func bearer(h *rpc.Handler, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/rpc" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"error":"missing or wrong bearer token"}`, http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		out := h.ServeJSONRPC(r.Context(), body)
		if out == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
	})
}

// leased is the item a case starts with: enqueued, then leased through the
// client.
type leased struct {
	entryID string
	fence   queue.Fence
}

func newClient(t *testing.T, baseURL, token string) *rpc.Client {
	t.Helper()
	c, err := rpc.NewClient(baseURL, token, nil)
	if err != nil {
		t.Fatalf("NewClient(%q): %v", baseURL, err)
	}
	return c
}

// TestClientAgainstHandler drives the typed client against the real
// handler over HTTP and a real Postgres: each case's result, and each
// failure's kind (*rpc.Error with its code, *rpc.HTTPStatusError, or a
// transport error).
func TestClientAgainstHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := queue.NewStore(dbtest.New(t), queue.Config{LeaseTTL: 10 * time.Minute})
	srv := httptest.NewServer(bearer(rpc.NewHandler(store, "test", nil), clientToken))
	t.Cleanup(srv.Close)
	good := newClient(t, srv.URL, clientToken)

	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	notRPC := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") }))
	t.Cleanup(notRPC.Close)

	n := 0
	// lease enqueues one item and leases it through the client.
	lease := func(t *testing.T) leased {
		t.Helper()
		n++
		res, err := store.Enqueue(ctx, queue.EnqueueParams{Dispatch: queue.SubjectDispatch{
			Subject:     &queue.SubjectRef{Kind: "github_issue", ID: fmt.Sprintf("1296269#%d", n)},
			WorkflowRef: "triage", TriggerSource: "test", RequestedAt: queue.Timestamp{Time: time.Now()},
		}})
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		// Finish the item whatever the case left it as, so the next case
		// leases its own.
		t.Cleanup(func() {
			if _, err := store.Drop(ctx, res.EntryID); err != nil {
				t.Errorf("drop %s: %v", res.EntryID, err)
			}
		})
		wf := fmt.Sprintf("wf-%d", n)
		got, err := good.Lease(ctx, queue.LeaseParams{Max: 1, OwnerID: "worker-1", WorkflowIDs: []string{wf}})
		if err != nil {
			t.Fatalf("Lease: %v", err)
		}
		if len(got.Leased) != 1 || got.Leased[0].Entry.EntryID != res.EntryID || got.Leased[0].Execution.WorkflowID != wf {
			t.Fatalf("Lease leased %d items (blocked %v), want entry %s under workflow %s", len(got.Leased), got.Blocked, res.EntryID, wf)
		}
		if ql := got.Leased[0].Execution.QueueLease; ql == nil || ql.OwnerID != "worker-1" {
			t.Fatalf("Lease fence %+v, want a queue lease owned by worker-1", got.Leased[0].Execution)
		}
		return leased{entryID: res.EntryID, fence: got.Leased[0].Execution}
	}

	cases := []struct {
		name string
		// call runs against a freshly leased item.
		call func(ctx context.Context, it leased) (any, error)
		// want is the mutation outcome (when the call returns one) or the
		// entry status read afterwards; empty to skip.
		wantOutcome queue.Outcome
		wantStatus  string
		// Exactly one kind of failure, or none.
		wantCode      int  // a JSON-RPC error with this code
		wantHTTP      int  // an *rpc.HTTPStatusError with this status
		wantTransport bool // neither of those
		check         func(t *testing.T, err error)
	}{
		{
			name: "renew",
			call: func(ctx context.Context, it leased) (any, error) {
				return good.Renew(ctx, queue.RenewParams{Execution: it.fence, TTLSecs: new(uint64(60))})
			},
			wantOutcome: queue.OutcomeApplied, wantStatus: queue.StatusAssigned,
		},
		{
			name: "complete with a note",
			call: func(ctx context.Context, it leased) (any, error) {
				return good.Complete(ctx, queue.CompleteParams{Execution: it.fence, Status: queue.StatusCompleted, Note: "all green"})
			},
			wantOutcome: queue.OutcomeApplied, wantStatus: queue.StatusCompleted,
		},
		{
			name: "complete without a note",
			call: func(ctx context.Context, it leased) (any, error) {
				return good.Complete(ctx, queue.CompleteParams{Execution: it.fence, Status: queue.StatusFailed})
			},
			wantOutcome: queue.OutcomeApplied, wantStatus: queue.StatusFailed,
		},
		{
			name: "release pending",
			call: func(ctx context.Context, it leased) (any, error) {
				return good.ReleasePending(ctx, queue.ReleasePendingParams{Execution: it.fence, Reason: "shutting down"})
			},
			wantOutcome: queue.OutcomeApplied, wantStatus: queue.StatusPending,
		},
		{
			name: "renew with a stale fence is an outcome, not an error",
			call: func(ctx context.Context, it leased) (any, error) {
				f := it.fence
				ql := *f.QueueLease
				ql.Generation++
				f.QueueLease = &ql
				return good.Renew(ctx, queue.RenewParams{Execution: f})
			},
			wantOutcome: queue.OutcomeStaleFence, wantStatus: queue.StatusAssigned,
		},
		{
			name: "legacy completion of a v2 item is a stale-fence error",
			call: func(ctx context.Context, it leased) (any, error) {
				return nil, good.Call(ctx, rpc.MethodLegacyCompletion, map[string]string{"entry_id": it.entryID, "status": queue.StatusCompleted}, nil)
			},
			wantCode: rpc.CodeStaleFence, wantStatus: queue.StatusAssigned,
			check: func(t *testing.T, err error) {
				var re *rpc.Error
				errors.As(err, &re)
				data, ok := re.Data.(map[string]any)
				if !ok || data["method"] != rpc.MethodLegacyCompletion || data["status"] != queue.StatusAssigned {
					t.Errorf("stale-fence data = %#v, want method %s and status assigned", re.Data, rpc.MethodLegacyCompletion)
				}
			},
		},
		{
			name: "unknown entry",
			call: func(ctx context.Context, _ leased) (any, error) {
				return good.Entry(ctx, uuid.NewString())
			},
			wantCode: rpc.CodeEntryNotFound,
			check: func(t *testing.T, err error) {
				if !rpc.IsNotFound(err) {
					t.Errorf("IsNotFound(%v) = false, want true", err)
				}
			},
		},
		{
			name: "lease max over 5 is invalid params",
			call: func(ctx context.Context, _ leased) (any, error) {
				return good.Lease(ctx, queue.LeaseParams{Max: 6, OwnerID: "w", WorkflowIDs: []string{"a", "b", "c", "d", "e", "f"}})
			},
			wantCode: rpc.CodeInvalidParams, wantStatus: queue.StatusAssigned,
		},
		{
			name: "wrong token is HTTP 401",
			call: func(ctx context.Context, it leased) (any, error) {
				return newClient(t, srv.URL+"/rpc", "nope").Renew(ctx, queue.RenewParams{Execution: it.fence})
			},
			wantHTTP: http.StatusUnauthorized, wantStatus: queue.StatusAssigned,
		},
		{
			name: "server unreachable",
			call: func(ctx context.Context, it leased) (any, error) {
				return newClient(t, closedURL, clientToken).Renew(ctx, queue.RenewParams{Execution: it.fence})
			},
			wantTransport: true,
			check: func(t *testing.T, err error) {
				if ue := new(url.Error); !errors.As(err, &ue) {
					t.Errorf("error %v does not wrap the *url.Error of http.Client.Do", err)
				}
			},
		},
		{
			name: "answer that is not JSON-RPC",
			call: func(ctx context.Context, _ leased) (any, error) {
				return newClient(t, notRPC.URL, clientToken).Entry(ctx, uuid.NewString())
			},
			wantTransport: true,
		},
		{
			name: "cancelled context",
			call: func(ctx context.Context, it leased) (any, error) {
				ctx, cancel := context.WithCancel(ctx)
				cancel()
				return good.Renew(ctx, queue.RenewParams{Execution: it.fence})
			},
			wantTransport: true,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("error %v is not context.Canceled", err)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it := lease(t)
			res, err := tc.call(ctx, it)

			var re *rpc.Error
			var he *rpc.HTTPStatusError
			isRPC, isHTTP := errors.As(err, &re), errors.As(err, &he)
			switch {
			case tc.wantCode != 0:
				if !isRPC || re.Code != tc.wantCode {
					t.Fatalf("error = %v, want a JSON-RPC error %d", err, tc.wantCode)
				}
			case tc.wantHTTP != 0:
				if !isHTTP || he.StatusCode != tc.wantHTTP || isRPC {
					t.Fatalf("error = %v, want HTTP %d and no JSON-RPC error", err, tc.wantHTTP)
				}
			case tc.wantTransport:
				if err == nil || isRPC || isHTTP {
					t.Fatalf("error = %v, want a transport error", err)
				}
			case err != nil:
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.check != nil {
				tc.check(t, err)
			}
			if mr, ok := res.(queue.MutationResult); ok && tc.wantOutcome != "" && mr.Outcome != tc.wantOutcome {
				t.Errorf("outcome = %q (%s), want %q", mr.Outcome, mr.Reason, tc.wantOutcome)
			}
			if tc.wantStatus != "" {
				v, err := good.Entry(ctx, it.entryID)
				if err != nil {
					t.Fatalf("Entry(%s): %v", it.entryID, err)
				}
				if v.EntryID != it.entryID || v.Status != tc.wantStatus {
					t.Errorf("Entry = %s %s, want %s %s", v.EntryID, v.Status, it.entryID, tc.wantStatus)
				}
			}
		})
	}
}

func TestNewClientURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"https://gitlease.example.com", true},
		{"https://gitlease.example.com/", true},
		{"http://127.0.0.1:8080/rpc", true},
		{"gitlease.example.com", false},
		{"ftp://gitlease.example.com", false},
		{"https://", false},
	} {
		_, err := rpc.NewClient(tc.in, "t", nil)
		if (err == nil) != tc.ok {
			t.Errorf("NewClient(%q) error = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}
