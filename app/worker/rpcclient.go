package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/queue/rpc"
)

// RPCError is a JSON-RPC error object a gitlease /rpc endpoint answered
// with (queue v2 §4: -32602 invalid params, -32201 unknown entry, …).
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message) }

// RPCClient calls a gitlease server's queue API over HTTP (POST /rpc with a
// bearer token). It is what `gitlease worker` leases through. It is safe for
// concurrent use.
type RPCClient struct {
	url   string
	token string
	hc    *http.Client
	ids   atomic.Int64
}

// NewRPCClient returns a client for the server at baseURL: either the
// server's base URL (https://gitlease.example.com; /rpc is added) or the full
// /rpc URL. hc is http.DefaultClient when nil. It returns an error when
// baseURL is not an http(s) URL.
func NewRPCClient(baseURL, token string, hc *http.Client) (*RPCClient, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gitlease URL %q is not an http(s) URL", baseURL)
	}
	if !strings.HasSuffix(u.Path, "/rpc") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/rpc"
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &RPCClient{url: u.String(), token: token, hc: hc}, nil
}

// maxRPCResponse bounds how much of an answer the client reads.
const maxRPCResponse = 16 << 20

// Call invokes one JSON-RPC method and decodes its result into result
// (skipped when result is nil). A JSON-RPC error answer is returned as
// *RPCError; a transport failure or a non-200 HTTP status (401 for a wrong
// token, 404 when /rpc is disabled) as a plain error.
func (c *RPCClient) Call(ctx context.Context, method string, params, result any) error {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.ids.Add(1), "method": method, "params": params})
	if err != nil {
		return fmt.Errorf("encode %s request: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build %s request: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("call %s: %w", method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxRPCResponse))
	if err != nil {
		return fmt.Errorf("read %s answer: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("call %s: HTTP %d: %s", method, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *RPCError       `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("decode %s answer: %w", method, err)
	}
	if env.Error != nil {
		return env.Error
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(env.Result, result); err != nil {
		return fmt.Errorf("decode %s result: %w", method, err)
	}
	return nil
}

// Lease calls queue/v2/lease.
func (c *RPCClient) Lease(ctx context.Context, p queue.LeaseParams) (queue.LeaseResult, error) {
	var res queue.LeaseResult
	err := c.Call(ctx, "queue/v2/lease", map[string]any{
		"max": p.Max, "owner_id": p.OwnerID, "workflow_ids": p.WorkflowIDs,
	}, &res)
	return res, err
}

// Renew calls queue/v2/lease/renew.
func (c *RPCClient) Renew(ctx context.Context, p queue.RenewParams) (queue.MutationResult, error) {
	params := map[string]any{"execution": p.Execution}
	if p.TTLSecs != nil {
		params["ttl_secs"] = *p.TTLSecs
	}
	return c.mutate(ctx, "queue/v2/lease/renew", params)
}

// Complete calls gitlease/completion: queue/v2/completion plus the
// worker's note (its output tail), which the check run shows.
func (c *RPCClient) Complete(ctx context.Context, p queue.CompleteParams) (queue.MutationResult, error) {
	params := map[string]any{"execution": p.Execution, "status": p.Status}
	if p.Note != "" {
		params["note"] = p.Note
	}
	return c.mutate(ctx, rpc.MethodCompletion, params)
}

// ReleasePending calls queue/v2/release_pending.
func (c *RPCClient) ReleasePending(ctx context.Context, p queue.ReleasePendingParams) (queue.MutationResult, error) {
	return c.mutate(ctx, "queue/v2/release_pending", map[string]any{"execution": p.Execution, "reason": p.Reason})
}

// Entry calls gitlease/entry/get: the item as the server shows it, finished
// ones included, with its provisioning once known.
func (c *RPCClient) Entry(ctx context.Context, entryID string) (queue.View, error) {
	var v queue.View
	err := c.Call(ctx, "gitlease/entry/get", map[string]any{"entry_id": entryID}, &v)
	return v, err
}

func (c *RPCClient) mutate(ctx context.Context, method string, params any) (queue.MutationResult, error) {
	var res queue.MutationResult
	err := c.Call(ctx, method, params, &res)
	return res, err
}

// leaser is the queue as a worker uses it. The built-in worker's is the
// Store itself; `gitlease worker`'s is an RPCClient over /rpc. Fence
// problems are outcomes in the MutationResult, not errors; an error means
// the call did not get an answer (or was malformed) and may be retried.
type leaser interface {
	Lease(ctx context.Context, p queue.LeaseParams) (queue.LeaseResult, error)
	Renew(ctx context.Context, p queue.RenewParams) (queue.MutationResult, error)
	Complete(ctx context.Context, p queue.CompleteParams) (queue.MutationResult, error)
	ReleasePending(ctx context.Context, p queue.ReleasePendingParams) (queue.MutationResult, error)
	Entry(ctx context.Context, entryID string) (queue.View, error)
}

var _ leaser = (*RPCClient)(nil)

// storeLeaser is the built-in worker's leaser: the Store, plus the
// gitlease/entry/get view of an item.
type storeLeaser struct{ *queue.Store }

func (s storeLeaser) Entry(ctx context.Context, entryID string) (queue.View, error) {
	v, err := s.View(ctx, entryID)
	if err != nil {
		return queue.View{}, fmt.Errorf("get entry %s: %w", entryID, err)
	}
	return v, nil
}

var _ leaser = storeLeaser{}

// isNotFound reports whether err says the entry does not exist, from the
// Store or over /rpc (-32201).
func isNotFound(err error) bool {
	var re *RPCError
	return errors.Is(err, queue.ErrNotFound) || (errors.As(err, &re) && re.Code == rpc.CodeEntryNotFound)
}

// rpcTimeout bounds one queue call of a worker, so a hung connection cannot
// hold a slot forever.
const rpcTimeout = 30 * time.Second
