// Package rpc is the queue v2 JSON-RPC surface of gitlease: the method table
// over queue.Store, the HTTP framing (single and batch requests), the stdio
// plugin session, and Client, the typed HTTP client that shares the
// server's param structs, method names and error type.
package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/gitlease/gitlease/queue"
)

// Method names of the queue protocol's v2 calls (queue v2 §3), which
// Handler serves and Client calls.
const (
	MethodV2Enqueue        = "queue/v2/enqueue"
	MethodV2Lease          = "queue/v2/lease"
	MethodV2Renew          = "queue/v2/lease/renew"
	MethodV2Recover        = "queue/v2/lease/recover"
	MethodV2Completion     = "queue/v2/completion"
	MethodV2ReleasePending = "queue/v2/release_pending"
)

// Method names of the protocol's legacy queue/* calls. The Legacy ones fail
// closed on v2 items (-32209); the others serve both kinds.
const (
	MethodList                 = "queue/list"
	MethodStats                = "queue/stats"
	MethodNextDeadline         = "queue/next_deadline"
	MethodHold                 = "queue/hold"
	MethodRelease              = "queue/release"
	MethodDrop                 = "queue/drop"
	MethodReorder              = "queue/reorder"
	MethodLegacyEnqueue        = "queue/enqueue"
	MethodLegacyLease          = "queue/lease"
	MethodLegacyMarkAssigned   = "queue/mark_assigned"
	MethodLegacyReleasePending = "queue/release_pending"
	MethodLegacyCompletion     = "queue/completion"
)

// gitlease's own methods for outside workers, beside the protocol's.
const (
	// MethodEntryGet reads any item with its provisioning and check run.
	MethodEntryGet = "gitlease/entry/get"
	// MethodCompletion is queue/v2/completion with an optional "note" (the
	// worker's output tail, shown in the item's check run).
	MethodCompletion = "gitlease/completion"
)

// Method names of the plugin lifecycle (answered over HTTP too, where they
// need no session). Any other "$/" method is a notification that gets no
// answer.
const (
	MethodInitialize  = "initialize"
	MethodInitialized = "initialized"
	MethodPing        = "$/ping"
	MethodHealthCheck = "health/check"
	MethodShutdown    = "shutdown"
	MethodExit        = "exit"
)

// Methods lists every method a plugin advertises in capabilities.methods,
// in the reference's order: the legacy queue/* names, the v2 names, then
// health/check.
func Methods() []string {
	return []string{
		MethodLegacyEnqueue, MethodList, MethodLegacyLease, MethodStats, MethodNextDeadline, MethodHold,
		MethodRelease, MethodLegacyReleasePending, MethodDrop, MethodReorder, MethodLegacyMarkAssigned, MethodLegacyCompletion,
		MethodV2Enqueue, MethodV2Lease, MethodV2Renew, MethodV2Recover, MethodV2Completion, MethodV2ReleasePending,
		MethodHealthCheck,
	}
}

type handlerFunc func(ctx context.Context, params json.RawMessage) (any, error)

// Handler answers queue method calls against a Store. It holds no per-call
// state and is safe for concurrent use.
type Handler struct {
	store   *queue.Store
	version string
	logger  *slog.Logger
	methods map[string]handlerFunc
}

// NewHandler returns a Handler over store; version is the plugin version it
// reports at initialize.
func NewHandler(store *queue.Store, version string, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{store: store, version: version, logger: logger}
	h.methods = map[string]handlerFunc{
		MethodV2Enqueue:            h.v2Enqueue,
		MethodV2Lease:              h.v2Lease,
		MethodV2Renew:              h.v2Renew,
		MethodV2Recover:            h.v2Recover,
		MethodV2Completion:         h.v2Completion,
		MethodV2ReleasePending:     h.v2ReleasePending,
		MethodList:                 h.list,
		MethodStats:                h.stats,
		MethodHold:                 h.hold,
		MethodRelease:              h.release,
		MethodDrop:                 h.drop,
		MethodReorder:              h.reorder,
		MethodNextDeadline:         h.nextDeadline,
		MethodLegacyEnqueue:        h.legacyEnqueue,
		MethodLegacyLease:          h.legacyLease,
		MethodLegacyMarkAssigned:   h.markAssigned,
		MethodLegacyReleasePending: h.legacyReleasePending,
		MethodLegacyCompletion:     h.legacyCompletion,
		MethodEntryGet:             h.entryGet,
		MethodCompletion:           h.noteCompletion,
	}
	return h
}

// Call runs one queue method. The result is ready to encode; a failure is
// always an *Error (storage failures are logged and reported as -32603).
//
// With a span in ctx (a traced /rpc request), each call of a known method
// is a child span named by the method, so the calls of a batch show apart;
// without one it costs a no-op span.
func (h *Handler) Call(ctx context.Context, method string, params json.RawMessage) (any, *Error) {
	fn, ok := h.methods[method]
	if !ok {
		return nil, errorf(CodeMethodNotFound, "method '%s' not implemented by gitlease", method)
	}
	ctx, span := trace.SpanFromContext(ctx).TracerProvider().Tracer(tracerName).Start(ctx, method,
		trace.WithAttributes(attribute.String("rpc.system", "jsonrpc"), attribute.String("rpc.method", method)))
	defer span.End()
	res, err := fn(ctx, params)
	if err != nil {
		e, internal := toError(err)
		span.SetAttributes(attribute.Int("rpc.jsonrpc.error_code", e.Code))
		if internal {
			span.SetStatus(codes.Error, e.Message)
			h.logger.ErrorContext(ctx, "queue call failed", "method", method, "err", err)
		}
		return nil, e
	}
	return res, nil
}

// tracerName names the instrumentation of the calls' spans.
const tracerName = "github.com/gitlease/gitlease/queue/rpc"

func absent(params json.RawMessage) bool {
	p := bytes.TrimSpace(params)
	return len(p) == 0 || bytes.Equal(p, []byte("null"))
}

// decode reads params loosely (legacy types are not strict).
func decode(method string, params json.RawMessage, v any) error {
	if absent(params) {
		return errorf(CodeInvalidParams, "invalid %s params: missing params", method)
	}
	if err := json.Unmarshal(params, v); err != nil {
		return errorf(CodeInvalidParams, "invalid %s params: %v", method, err)
	}
	return nil
}

// decodeDispatch reads a SubjectDispatch, which is not strict but has
// required fields.
func decodeDispatch(method string, raw json.RawMessage) (queue.SubjectDispatch, error) {
	var d queue.SubjectDispatch
	if absent(raw) {
		return d, errorf(CodeInvalidParams, "invalid %s params: missing field `subject_dispatch`", method)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return d, errorf(CodeInvalidParams, "invalid %s params: subject_dispatch must be an object", method)
	}
	for _, f := range []string{"workflow_ref", "trigger_source", "requested_at"} {
		if absent(fields[f]) {
			return d, errorf(CodeInvalidParams, "invalid %s params: missing field `%s` in subject_dispatch", method, f)
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return d, errorf(CodeInvalidParams, "invalid %s params: subject_dispatch: %v", method, err)
	}
	return d, nil
}

func required[T any](method, field string, v *T) error {
	if v == nil {
		return errorf(CodeInvalidParams, "invalid %s params: missing field `%s`", method, field)
	}
	return nil
}

// EnqueueParams are queue/v2/enqueue's params, decoded strictly (an unknown
// field is -32602). SubjectDispatch is a queue.SubjectDispatch as JSON; it
// must carry workflow_ref, trigger_source and requested_at.
type EnqueueParams struct {
	SubjectDispatch json.RawMessage    `json:"subject_dispatch"`
	IdempotencyKey  *string            `json:"idempotency_key,omitempty"`
	Repository      *queue.Reservation `json:"repository,omitempty"`
	RunAt           *string            `json:"run_at,omitempty"`
	ExpireAfterSecs *uint64            `json:"expire_after_secs,omitempty"`
}

func (h *Handler) v2Enqueue(ctx context.Context, params json.RawMessage) (any, error) {
	const m = MethodV2Enqueue
	var p EnqueueParams
	if err := decodeStrict(params, &p, m); err != nil {
		return nil, err
	}
	d, err := decodeDispatch(m, p.SubjectDispatch)
	if err != nil {
		return nil, err
	}
	ep := queue.EnqueueParams{Dispatch: d, Reservation: p.Repository, ExpireAfterSecs: p.ExpireAfterSecs}
	if p.IdempotencyKey != nil {
		if strings.TrimSpace(*p.IdempotencyKey) == "" {
			return nil, errorf(CodeInvalidParams, "idempotency_key must not be blank")
		}
		ep.IdempotencyKey = *p.IdempotencyKey
	}
	if p.RunAt != nil {
		ep.RunAt = *p.RunAt
	}
	return h.store.Enqueue(ctx, ep)
}

// LeaseParams are queue/v2/lease's params, decoded strictly. Max (1..5),
// OwnerID and WorkflowIDs (one per leased item, unique) are required;
// Exclude lists fences the caller already holds.
type LeaseParams struct {
	Max         *uint64       `json:"max"`
	OwnerID     *string       `json:"owner_id"`
	WorkflowIDs []string      `json:"workflow_ids"`
	Exclude     []queue.Fence `json:"exclude,omitempty"`
}

func (h *Handler) v2Lease(ctx context.Context, params json.RawMessage) (any, error) {
	const m = MethodV2Lease
	var p LeaseParams
	if err := decodeStrict(params, &p, m); err != nil {
		return nil, err
	}
	if p.Max == nil || p.OwnerID == nil || p.WorkflowIDs == nil || *p.Max > queue.MaxLeaseBatch {
		return nil, errorf(CodeInvalidParams, "queue v2 lease requires max 1..5, owner_id, and max unique workflow_ids")
	}
	return h.store.Lease(ctx, queue.LeaseParams{Max: int(*p.Max), OwnerID: *p.OwnerID, WorkflowIDs: p.WorkflowIDs, Exclude: p.Exclude})
}

// RenewParams are queue/v2/lease/renew's params, decoded strictly.
// Execution is required; TTLSecs overrides the server's lease TTL.
type RenewParams struct {
	Execution *queue.Fence `json:"execution"`
	TTLSecs   *uint64      `json:"ttl_secs,omitempty"`
}

func (h *Handler) v2Renew(ctx context.Context, params json.RawMessage) (any, error) {
	const m = MethodV2Renew
	var p RenewParams
	if err := decodeStrict(params, &p, m); err != nil {
		return nil, err
	}
	if err := required(m, "execution", p.Execution); err != nil {
		return nil, err
	}
	return h.store.Renew(ctx, queue.RenewParams{Execution: *p.Execution, TTLSecs: p.TTLSecs})
}

// RecoverParams are queue/v2/lease/recover's params, decoded strictly.
// Execution and NewOwnerID are required.
type RecoverParams struct {
	Execution  *queue.Fence `json:"execution"`
	NewOwnerID *string      `json:"new_owner_id"`
	TTLSecs    *uint64      `json:"ttl_secs,omitempty"`
}

func (h *Handler) v2Recover(ctx context.Context, params json.RawMessage) (any, error) {
	const m = MethodV2Recover
	var p RecoverParams
	if err := decodeStrict(params, &p, m); err != nil {
		return nil, err
	}
	if err := required(m, "execution", p.Execution); err != nil {
		return nil, err
	}
	if err := required(m, "new_owner_id", p.NewOwnerID); err != nil {
		return nil, err
	}
	return h.store.Recover(ctx, queue.RecoverParams{Execution: *p.Execution, NewOwnerID: *p.NewOwnerID, TTLSecs: p.TTLSecs})
}

// CompletionParams are queue/v2/completion's params, decoded strictly.
// Execution and Status are required; WorkflowRef is accepted and ignored.
type CompletionParams struct {
	Execution   *queue.Fence `json:"execution"`
	Status      *string      `json:"status"`
	WorkflowRef *string      `json:"workflow_ref,omitempty"`
}

// NoteCompletionParams are gitlease/completion's params: CompletionParams
// plus Note, the worker's output tail, which the item's check run shows.
type NoteCompletionParams struct {
	Execution   *queue.Fence `json:"execution"`
	Status      *string      `json:"status"`
	WorkflowRef *string      `json:"workflow_ref,omitempty"`
	Note        *string      `json:"note,omitempty"`
}

func (h *Handler) v2Completion(ctx context.Context, params json.RawMessage) (any, error) {
	var p CompletionParams
	if err := decodeStrict(params, &p, MethodV2Completion); err != nil {
		return nil, err
	}
	return h.complete(ctx, MethodV2Completion, NoteCompletionParams{Execution: p.Execution, Status: p.Status})
}

func (h *Handler) noteCompletion(ctx context.Context, params json.RawMessage) (any, error) {
	var p NoteCompletionParams
	if err := decodeStrict(params, &p, MethodCompletion); err != nil {
		return nil, err
	}
	return h.complete(ctx, MethodCompletion, p)
}

func (h *Handler) complete(ctx context.Context, method string, p NoteCompletionParams) (any, error) {
	if err := required(method, "execution", p.Execution); err != nil {
		return nil, err
	}
	if err := required(method, "status", p.Status); err != nil {
		return nil, err
	}
	cp := queue.CompleteParams{Execution: *p.Execution, Status: *p.Status}
	if p.Note != nil {
		cp.Note = *p.Note
	}
	return h.store.Complete(ctx, cp)
}

// ReleasePendingParams are queue/v2/release_pending's params, decoded
// strictly. Execution and Reason are required.
type ReleasePendingParams struct {
	Execution *queue.Fence `json:"execution"`
	Reason    *string      `json:"reason"`
}

func (h *Handler) v2ReleasePending(ctx context.Context, params json.RawMessage) (any, error) {
	const m = MethodV2ReleasePending
	var p ReleasePendingParams
	if err := decodeStrict(params, &p, m); err != nil {
		return nil, err
	}
	if err := required(m, "execution", p.Execution); err != nil {
		return nil, err
	}
	if err := required(m, "reason", p.Reason); err != nil {
		return nil, err
	}
	return h.store.ReleasePending(ctx, queue.ReleasePendingParams{Execution: *p.Execution, Reason: *p.Reason})
}

func (h *Handler) list(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		Status []string `json:"status"`
		Limit  *uint64  `json:"limit"`
		Offset *uint64  `json:"offset"`
	}
	if !absent(params) {
		if err := decode(MethodList, params, &p); err != nil {
			return nil, err
		}
	}
	lp := queue.ListParams{Status: p.Status, Limit: p.Limit}
	if p.Offset != nil {
		lp.Offset = *p.Offset
	}
	return h.store.List(ctx, lp)
}

func (h *Handler) stats(ctx context.Context, _ json.RawMessage) (any, error) {
	return h.store.Stats(ctx)
}

// EntryIDParams name one item: the params of gitlease/entry/get,
// queue/hold, queue/release and queue/drop. EntryID is required.
type EntryIDParams struct {
	EntryID *string `json:"entry_id"`
}

func (h *Handler) entryID(method string, params json.RawMessage) (string, error) {
	var p EntryIDParams
	if err := decode(method, params, &p); err != nil {
		return "", err
	}
	if err := required(method, "entry_id", p.EntryID); err != nil {
		return "", err
	}
	return *p.EntryID, nil
}

func (h *Handler) hold(ctx context.Context, params json.RawMessage) (any, error) {
	id, err := h.entryID(MethodHold, params)
	if err != nil {
		return nil, err
	}
	return h.store.Hold(ctx, id)
}

func (h *Handler) release(ctx context.Context, params json.RawMessage) (any, error) {
	id, err := h.entryID(MethodRelease, params)
	if err != nil {
		return nil, err
	}
	return h.store.Release(ctx, id)
}

func (h *Handler) drop(ctx context.Context, params json.RawMessage) (any, error) {
	id, err := h.entryID(MethodDrop, params)
	if err != nil {
		return nil, err
	}
	return h.store.Drop(ctx, id)
}

func (h *Handler) reorder(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		EntryIDs []string `json:"entry_ids"`
	}
	if err := decode(MethodReorder, params, &p); err != nil {
		return nil, err
	}
	n, err := h.store.Reorder(ctx, p.EntryIDs)
	if err != nil {
		h.logger.ErrorContext(ctx, "queue reorder failed", "err", err)
		return nil, errorf(CodeReorderFailed, "queue reorder failed")
	}
	return map[string]int{"reordered_count": n}, nil
}

func (h *Handler) nextDeadline(ctx context.Context, _ json.RawMessage) (any, error) {
	t, err := h.store.NextDeadline(ctx)
	if err != nil {
		return nil, err
	}
	res := struct {
		NextRunAt *queue.EntryTime `json:"next_run_at,omitempty"`
	}{}
	if t != nil {
		res.NextRunAt = &queue.EntryTime{Time: *t}
	}
	return res, nil
}

func (h *Handler) legacyEnqueue(ctx context.Context, params json.RawMessage) (any, error) {
	const m = MethodLegacyEnqueue
	var p struct {
		SubjectDispatch json.RawMessage `json:"subject_dispatch"`
		RunAt           string          `json:"run_at"`
		ExpireAfterSecs *uint64         `json:"expire_after_secs"`
	}
	if err := decode(m, params, &p); err != nil {
		return nil, err
	}
	d, err := decodeDispatch(m, p.SubjectDispatch)
	if err != nil {
		return nil, err
	}
	return h.store.LegacyEnqueue(ctx, d, p.RunAt, p.ExpireAfterSecs)
}

func (h *Handler) legacyLease(ctx context.Context, params json.RawMessage) (any, error) {
	const m = MethodLegacyLease
	var p struct {
		Max             *uint64  `json:"max"`
		WorkflowIDs     []string `json:"workflow_ids"`
		ExcludeSubjects []string `json:"exclude_subjects"`
	}
	if err := decode(m, params, &p); err != nil {
		return nil, err
	}
	if err := required(m, "max", p.Max); err != nil {
		return nil, err
	}
	if *p.Max > 1000 {
		return nil, errorf(CodeInvalidParams, "invalid %s params: max must be at most 1000", m)
	}
	leased, err := h.store.LegacyLease(ctx, int(*p.Max), p.WorkflowIDs, p.ExcludeSubjects)
	if err != nil {
		return nil, err
	}
	return map[string]any{"leased": leased}, nil
}

func (h *Handler) markAssigned(ctx context.Context, params json.RawMessage) (any, error) {
	const m = MethodLegacyMarkAssigned
	var p struct {
		EntryID    *string `json:"entry_id"`
		WorkflowID string  `json:"workflow_id"`
	}
	if err := decode(m, params, &p); err != nil {
		return nil, err
	}
	if err := required(m, "entry_id", p.EntryID); err != nil {
		return nil, err
	}
	return h.store.MarkAssigned(ctx, *p.EntryID, p.WorkflowID)
}

func (h *Handler) legacyReleasePending(ctx context.Context, params json.RawMessage) (any, error) {
	const m = MethodLegacyReleasePending
	var p struct {
		EntryID *string `json:"entry_id"`
		Reason  *string `json:"reason"`
	}
	if err := decode(m, params, &p); err != nil {
		return nil, err
	}
	if err := required(m, "entry_id", p.EntryID); err != nil {
		return nil, err
	}
	if err := required(m, "reason", p.Reason); err != nil {
		return nil, err
	}
	if err := h.store.LegacyReleasePending(ctx, *p.EntryID, *p.Reason); err != nil {
		return nil, err
	}
	return map[string]string{"entry_id": *p.EntryID, "status": queue.StatusPending}, nil
}

func (h *Handler) legacyCompletion(ctx context.Context, params json.RawMessage) (any, error) {
	const m = MethodLegacyCompletion
	var p struct {
		EntryID     *string `json:"entry_id"`
		Status      *string `json:"status"`
		WorkflowRef string  `json:"workflow_ref"`
		WorkflowID  string  `json:"workflow_id"`
	}
	if err := decode(m, params, &p); err != nil {
		return nil, err
	}
	if err := required(m, "entry_id", p.EntryID); err != nil {
		return nil, err
	}
	if err := required(m, "status", p.Status); err != nil {
		return nil, err
	}
	return h.store.LegacyComplete(ctx, *p.EntryID, *p.Status, p.WorkflowRef, p.WorkflowID)
}

func (h *Handler) entryGet(ctx context.Context, params json.RawMessage) (any, error) {
	id, err := h.entryID(MethodEntryGet, params)
	if err != nil {
		return nil, err
	}
	v, err := h.store.View(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get entry %s: %w", id, err)
	}
	return v, nil
}
