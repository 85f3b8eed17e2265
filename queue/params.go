package queue

// EnqueueParams is a request to create a v2 work item (QueueEnqueueV2Request).
type EnqueueParams struct {
	// Dispatch is required and must carry a Subject.
	Dispatch SubjectDispatch
	// IdempotencyKey, if set, binds the request: a repeat with the same
	// request hash replays the first answer.
	IdempotencyKey string
	// Reservation, if set, is the exact repository/base/head the item writes.
	Reservation *Reservation
	// RunAt (RFC 3339, kept as sent) defers the item; ExpireAfterSecs drops it
	// if still pending that long after RunAt.
	RunAt           string
	ExpireAfterSecs *uint64
	// FromGitHub marks an item the webhook intake creates from a verified
	// delivery, the only kind GitHub side effects are written for
	// (docs/queue.md). It is never decoded from a request (json:"-"): no queue API
	// caller can set it, whatever its dispatch says.
	FromGitHub bool `json:"-"`
	// TraceParent, if set, is the W3C traceparent of the trace the item
	// belongs to (the delivery that created it), stored with it so the work
	// it causes joins that trace. Like FromGitHub, never decoded from a
	// request.
	TraceParent string `json:"-"`
}

// EnqueueResult is the answer to an enqueue (QueueEnqueueV2Response).
// Enqueued is false only for a replay of the same key and request hash.
type EnqueueResult struct {
	Enqueued bool              `json:"enqueued"`
	EntryID  string            `json:"entry_id"`
	Subject  SubjectGeneration `json:"subject"`
}
