package rpc

import (
	"bytes"
	"context"
	"encoding/json"
)

// response is a JSON-RPC 2.0 response object. Exactly one of Result and
// Error is set.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// MaxBatch is the most requests one HTTP JSON-RPC batch may hold (docs/http.md).
// A longer batch is refused whole with a single -32600 response; none of
// its calls run.
const MaxBatch = 100

// router answers one method call. noReply is true for calls that must get no
// response even when they carry an id ($/ notifications, exit).
type router func(ctx context.Context, method string, params json.RawMessage) (result any, err *Error, noReply bool)

// handleMessage processes one decoded JSON value as a request or
// notification and returns its response, or nil when none is owed.
func handleMessage(ctx context.Context, raw json.RawMessage, route router) *response {
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(raw, &msg); err != nil || msg == nil {
		return &response{JSONRPC: "2.0", ID: nullID, Error: errorf(CodeInvalidRequest, "invalid request: a JSON-RPC message must be an object")}
	}
	id, isRequest := msg["id"]
	if isRequest && !validID(id) {
		return &response{JSONRPC: "2.0", ID: nullID, Error: errorf(CodeInvalidRequest, "invalid request: id must be a string, a number or null")}
	}
	if !isRequest {
		id = nullID
	}
	var version string
	if err := json.Unmarshal(msg["jsonrpc"], &version); err != nil || version != "2.0" {
		return &response{JSONRPC: "2.0", ID: id, Error: errorf(CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)}
	}
	method, ok := methodOf(msg)
	if !ok {
		return &response{JSONRPC: "2.0", ID: id, Error: errorf(CodeInvalidRequest, `invalid request: "method" must be a non-empty string`)}
	}
	result, rpcErr, noReply := route(ctx, method, msg["params"])
	if !isRequest || noReply {
		return nil
	}
	if rpcErr != nil {
		return &response{JSONRPC: "2.0", ID: id, Error: rpcErr}
	}
	b, err := json.Marshal(result)
	if err != nil {
		return &response{JSONRPC: "2.0", ID: id, Error: errorf(CodeInternal, "internal error: encode result")}
	}
	return &response{JSONRPC: "2.0", ID: id, Result: b}
}

// methodOf is the method a decoded message names, as handleMessage runs it;
// ok is false when it names none (and so runs nothing).
func methodOf(msg map[string]json.RawMessage) (method string, ok bool) {
	if err := json.Unmarshal(msg["method"], &method); err != nil || method == "" {
		return "", false
	}
	return method, true
}

// PayloadMethods returns the methods an HTTP body would run, in order: the
// one of a single message or those of a batch, decoded exactly as the
// handler decodes them, so a method it does not list is one that cannot
// run. A body that runs nothing (not JSON, an empty or too long batch,
// messages naming no method) gives none.
func PayloadMethods(body []byte) []string {
	body = bytes.TrimSpace(body)
	if !json.Valid(body) {
		return nil
	}
	msgs := []json.RawMessage{body}
	if len(body) > 0 && body[0] == '[' {
		msgs = nil
		if err := json.Unmarshal(body, &msgs); err != nil || len(msgs) > MaxBatch {
			return nil
		}
	}
	var methods []string
	for _, raw := range msgs {
		var msg map[string]json.RawMessage
		if err := json.Unmarshal(raw, &msg); err != nil || msg == nil {
			continue
		}
		if m, ok := methodOf(msg); ok {
			methods = append(methods, m)
		}
	}
	return methods
}

// WorkerMethod reports whether method is one a worker needs (SPEC §7.1):
// leasing, renewing, recovering, completing (gitlease/completion too, the
// same completion with a note) and releasing its own items, reading an
// entry, the queue's stats and the health check. GITLEASE_RPC_WORKER_TOKEN
// may call these and nothing else.
func WorkerMethod(method string) bool {
	switch method {
	case MethodV2Lease, MethodV2Renew, MethodV2Recover, MethodV2Completion, MethodCompletion,
		MethodV2ReleasePending, MethodEntryGet, MethodStats, MethodHealthCheck:
		return true
	}
	return false
}

func validID(id json.RawMessage) bool {
	id = bytes.TrimSpace(id)
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// handlePayload processes an HTTP body: one message or a batch of at most
// MaxBatch. It returns the bytes to send, or nil when only notifications
// were sent.
func handlePayload(ctx context.Context, body []byte, route router) []byte {
	body = bytes.TrimSpace(body)
	if !json.Valid(body) {
		return mustMarshal(&response{JSONRPC: "2.0", ID: nullID, Error: errorf(CodeParseError, "parse error: the body is not valid JSON")})
	}
	if len(body) > 0 && body[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(body, &batch); err != nil || len(batch) == 0 {
			return mustMarshal(&response{JSONRPC: "2.0", ID: nullID, Error: errorf(CodeInvalidRequest, "invalid request: a batch must be a non-empty array")})
		}
		if len(batch) > MaxBatch {
			return mustMarshal(&response{JSONRPC: "2.0", ID: nullID, Error: errorf(CodeInvalidRequest, "invalid request: a batch holds %d requests, more than the %d allowed", len(batch), MaxBatch)})
		}
		out := make([]*response, 0, len(batch))
		for _, m := range batch {
			if r := handleMessage(ctx, m, route); r != nil {
				out = append(out, r)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return mustMarshal(out)
	}
	if r := handleMessage(ctx, body, route); r != nil {
		return mustMarshal(r)
	}
	return nil
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // responses are built from types that always encode
	}
	return b
}

// ServeJSONRPC answers an HTTP JSON-RPC body: a single request or a batch of
// at most MaxBatch (a longer one gets a single -32600 response).
// It returns nil when the body held only notifications (HTTP 204). Over HTTP
// no initialize is needed: the transport is stateless.
func (h *Handler) ServeJSONRPC(ctx context.Context, body []byte) []byte {
	return handlePayload(ctx, body, h.routeStateless)
}

func (h *Handler) routeStateless(ctx context.Context, method string, params json.RawMessage) (any, *Error, bool) {
	if r, e, noReply, ok := h.lifecycle(method, params); ok {
		return r, e, noReply
	}
	res, err := h.Call(ctx, method, params)
	return res, err, false
}

// lifecycle answers the plugin lifecycle methods that need no session state.
func (h *Handler) lifecycle(method string, params json.RawMessage) (result any, err *Error, noReply, ok bool) {
	switch method {
	case MethodPing, MethodShutdown:
		return struct{}{}, nil, false, true
	case MethodHealthCheck:
		return map[string]string{"status": "healthy"}, nil, false, true
	case MethodInitialized:
		return nil, nil, true, true
	case MethodInitialize:
		res, e := h.initialize(params)
		return res, e, false, true
	}
	if len(method) > 2 && method[:2] == "$/" {
		return nil, nil, true, true
	}
	return nil, nil, false, false
}
