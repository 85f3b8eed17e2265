package rpc

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

	"github.com/gitlease/gitlease/queue"
)

// maxResponse bounds how much of an answer Client reads.
const maxResponse = 16 << 20

// Client calls a gitlease server's queue API over HTTP: one POST /rpc per
// call, with a bearer token. It encodes the same param structs Handler
// decodes and reports JSON-RPC errors as the server's own *Error. It is
// what a remote worker leases through, and is safe for concurrent use.
type Client struct {
	url   string
	token string
	hc    *http.Client
	ids   atomic.Int64
}

// HTTPStatusError is an /rpc answer whose HTTP status is not 200, so it
// carries no JSON-RPC response: 401 for a missing or wrong token, 404 when
// the server has /rpc disabled, 413 for a body over its limit.
type HTTPStatusError struct {
	Method     string
	StatusCode int
	Body       string // the answer's body, trimmed
}

func (e *HTTPStatusError) Error() string {
	return fmt.Sprintf("call %s: HTTP %d: %s", e.Method, e.StatusCode, e.Body)
}

// NewClient returns a Client for the server at baseURL, either the server's
// base URL (https://gitlease.example.com; /rpc is added) or the full /rpc
// URL, sending token as its bearer token. hc is http.DefaultClient when
// nil. It returns an error when baseURL is not an http(s) URL with a host.
func NewClient(baseURL, token string, hc *http.Client) (*Client, error) {
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
	return &Client{url: u.String(), token: token, hc: hc}, nil
}

// request is a JSON-RPC 2.0 request as Client sends it.
type request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// Call invokes method with params (left out when nil) as one JSON-RPC
// request and decodes its result into result (skipped when result is nil).
// A JSON-RPC error answer is returned as *Error, the server's own type, with
// its Code, Message and Data (Data decoded as plain JSON values). Every
// other failure is a wrapped transport error: the request could not be
// sent or answered (the http.Client's error, ctx's among them), the status
// was not 200 (*HTTPStatusError), or the answer was not a JSON-RPC response.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	body, err := json.Marshal(request{JSONRPC: "2.0", ID: c.ids.Add(1), Method: method, Params: params})
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
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("read %s answer: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		return &HTTPStatusError{Method: method, StatusCode: resp.StatusCode, Body: strings.TrimSpace(string(raw))}
	}
	var env response
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

// Lease calls queue/v2/lease: up to p.Max items for p.OwnerID, one of
// p.WorkflowIDs each, skipping the fences in p.Exclude. Items the queue
// could not lease are listed in the result's Blocked, not as errors. Invalid
// params are an *Error with CodeInvalidParams; other errors are as Call's.
func (c *Client) Lease(ctx context.Context, p queue.LeaseParams) (queue.LeaseResult, error) {
	var res queue.LeaseResult
	err := c.Call(ctx, MethodV2Lease, LeaseParams{
		Max: new(uint64(p.Max)), OwnerID: new(p.OwnerID), WorkflowIDs: p.WorkflowIDs, Exclude: p.Exclude,
	}, &res)
	return res, err
}

// Renew calls queue/v2/lease/renew for p.Execution, with the server's lease
// TTL unless p.TTLSecs is set. A stale or lost fence is an outcome in the
// result, not an error; errors are as Call's.
func (c *Client) Renew(ctx context.Context, p queue.RenewParams) (queue.MutationResult, error) {
	return c.mutate(ctx, MethodV2Renew, RenewParams{Execution: &p.Execution, TTLSecs: p.TTLSecs})
}

// Complete finishes p.Execution as p.Status through gitlease/completion
// rather than queue/v2/completion: the same mutation, plus p.Note (the
// worker's output tail, sent only when not empty), which the item's check
// run shows. A stale fence is an outcome in the result, not an error;
// errors are as Call's.
func (c *Client) Complete(ctx context.Context, p queue.CompleteParams) (queue.MutationResult, error) {
	params := NoteCompletionParams{Execution: &p.Execution, Status: &p.Status}
	if p.Note != "" {
		params.Note = &p.Note
	}
	return c.mutate(ctx, MethodCompletion, params)
}

// ReleasePending calls queue/v2/release_pending: p.Execution goes back to
// pending, p.Reason recorded. A stale fence is an outcome in the result, not
// an error; errors are as Call's.
func (c *Client) ReleasePending(ctx context.Context, p queue.ReleasePendingParams) (queue.MutationResult, error) {
	return c.mutate(ctx, MethodV2ReleasePending, ReleasePendingParams{Execution: &p.Execution, Reason: &p.Reason})
}

// Entry calls gitlease/entry/get: the item as the server shows it, finished
// ones included, with its provisioning once known. An unknown entryID is an
// *Error with CodeEntryNotFound (IsNotFound reports it); other errors are
// as Call's.
func (c *Client) Entry(ctx context.Context, entryID string) (queue.View, error) {
	var v queue.View
	err := c.Call(ctx, MethodEntryGet, EntryIDParams{EntryID: &entryID}, &v)
	return v, err
}

func (c *Client) mutate(ctx context.Context, method string, params any) (queue.MutationResult, error) {
	var res queue.MutationResult
	err := c.Call(ctx, method, params, &res)
	return res, err
}

// IsNotFound reports whether err says the queue entry does not exist,
// whether it came from a queue.Store (queue.ErrNotFound) or over JSON-RPC
// (an *Error with CodeEntryNotFound).
func IsNotFound(err error) bool {
	var re *Error
	return errors.Is(err, queue.ErrNotFound) || (errors.As(err, &re) && re.Code == CodeEntryNotFound)
}
