package queue

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotFound is returned by Store methods that look an item up by ID when no
// item has that ID.
var ErrNotFound = errors.New("queue entry not found")

// InvalidError is returned when a request fails validation. Its message names
// the problem; the JSON-RPC layer sends it as -32602.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

func invalidf(format string, args ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}

// JSONErrorText returns the message of an encoding/json error as an
// InvalidError quotes it: without encoding/json's "json: ".
func JSONErrorText(err error) string {
	if err == nil {
		return "unknown error"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// SubjectCollisionError is returned by Enqueue when the subject already has a
// live generation. Nothing was created and no idempotency key was bound.
type SubjectCollisionError struct {
	QualifiedID string
	EntryID     string
	// Generation is the live holder's generation; nil for a legacy holder
	// that has none yet.
	Generation *uint64
	Status     string
}

func (e *SubjectCollisionError) Error() string {
	return fmt.Sprintf("subject %s already has an active generation; enqueue rejected", e.QualifiedID)
}

// ReservationCollisionError is returned by Enqueue when another live item
// holds the same repository and head ref. Nothing was created.
type ReservationCollisionError struct {
	Holder      Reservation // the holder's stored reservation
	EntryID     string
	QualifiedID string
	Generation  uint64
	Status      string
}

func (e *ReservationCollisionError) Error() string {
	return fmt.Sprintf("repository reservation %s %s is held by queue entry %s",
		e.Holder.Repository, e.Holder.HeadRef, e.EntryID)
}

// IdempotencyConflictError is returned by Enqueue when the idempotency key is
// already bound to a request with a different hash.
type IdempotencyConflictError struct{ Key string }

func (e *IdempotencyConflictError) Error() string {
	return "idempotency_key is already bound to a different queue request"
}
