package rpc

import (
	"errors"
	"fmt"

	"github.com/gitlease/gitlease/queue"
)

// JSON-RPC error codes: the standard ones and the queue kind's (queue v2 §4).
const (
	CodeParseError                 = -32700
	CodeInvalidRequest             = -32600
	CodeMethodNotFound             = -32601
	CodeInvalidParams              = -32602
	CodeInternal                   = -32603
	CodeNotInitialized             = -32000
	CodeEntryNotFound              = -32201
	CodeEntryNotPending            = -32203
	CodeReorderFailed              = -32204
	CodeWorkflowIDCountMismatch    = -32206
	CodeProjectBindingMismatch     = -32207
	CodeEntryNotAssigned           = -32208
	CodeStaleFence                 = -32209
	CodeSubjectGenerationActive    = -32211
	CodeRepositoryReservationTaken = -32212
)

// Error is a JSON-RPC error object.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message) }

func errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// toError maps an error from the queue onto its JSON-RPC error. This is the
// one home of that table. Anything unrecognised is -32603 without internals;
// internal reports whether the caller should log err.
func toError(err error) (e *Error, internal bool) {
	var (
		rpcErr     *Error
		invalid    *queue.InvalidError
		idem       *queue.IdempotencyConflictError
		subject    *queue.SubjectCollisionError
		reserved   *queue.ReservationCollisionError
		stale      *queue.StaleFenceError
		notPending *queue.NotPendingError
		notAssign  *queue.NotAssignedError
		wfCount    *queue.WorkflowIDCountError
	)
	switch {
	case errors.As(err, &rpcErr):
		return rpcErr, false
	case errors.As(err, &invalid):
		return &Error{Code: CodeInvalidParams, Message: invalid.Msg}, false
	case errors.As(err, &idem):
		return &Error{Code: CodeInvalidParams, Message: idem.Error()}, false
	case errors.As(err, &subject):
		return &Error{Code: CodeSubjectGenerationActive, Message: subject.Error(), Data: map[string]any{
			"qualified_id": subject.QualifiedID, "entry_id": subject.EntryID,
			"generation": subject.Generation, "status": subject.Status,
		}}, false
	case errors.As(err, &reserved):
		return &Error{Code: CodeRepositoryReservationTaken, Message: reserved.Error(), Data: map[string]any{
			"repository": reserved.Holder.Repository, "base_ref": reserved.Holder.BaseRef, "head_ref": reserved.Holder.HeadRef,
			"entry_id": reserved.EntryID, "qualified_id": reserved.QualifiedID,
			"generation": reserved.Generation, "status": reserved.Status,
		}}, false
	case errors.As(err, &stale):
		return &Error{Code: CodeStaleFence, Message: stale.Error(), Data: map[string]any{
			"method": stale.Method, "entry_id": stale.EntryID, "qualified_id": stale.QualifiedID,
			"generation": stale.Generation, "status": stale.Status,
		}}, false
	case errors.As(err, &notPending):
		return &Error{Code: CodeEntryNotPending, Message: notPending.Error()}, false
	case errors.As(err, &notAssign):
		return &Error{Code: CodeEntryNotAssigned, Message: notAssign.Error(), Data: map[string]any{"actual_state": notAssign.ActualState}}, false
	case errors.As(err, &wfCount):
		return &Error{Code: CodeWorkflowIDCountMismatch, Message: wfCount.Error(), Data: map[string]any{"expected": wfCount.Expected, "actual": wfCount.Actual}}, false
	case errors.Is(err, queue.ErrNotFound):
		return &Error{Code: CodeEntryNotFound, Message: "queue entry not found"}, false
	}
	return &Error{Code: CodeInternal, Message: "internal error: the queue could not complete the call"}, true
}
