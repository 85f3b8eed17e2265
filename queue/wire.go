package queue

import (
	"encoding/json"
	"time"
)

// The wire types of the queue v2 protocol (protocol/queue-v2.md §2). Field
// names, omit-empty rules and strictness follow the reference exactly; the
// JSON-RPC layer decodes requests into these and encodes results from them.

// FenceSchema and FenceVersion identify the only execution fence format.
const (
	FenceSchema  = "animus.execution-fence.v1"
	FenceVersion = 1
)

// SubjectRef names what a dispatch is about. It has a tagged legacy form and
// a flat form on the wire; see MarshalJSON and UnmarshalJSON.
type SubjectRef struct {
	Kind        string          `json:"kind"`
	ID          string          `json:"id"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Labels      []string        `json:"labels,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// Actor is who asked for a dispatch.
type Actor struct {
	UserID   string   `json:"user_id"`
	Claims   []string `json:"claims,omitempty"`
	TenantID string   `json:"tenant_id,omitempty"`
}

// SubjectDispatch is the unit of work a queue entry carries. It is not strict:
// unknown fields are dropped.
type SubjectDispatch struct {
	Subject       *SubjectRef       `json:"subject,omitempty"`
	WorkflowRef   string            `json:"workflow_ref"`
	Input         json.RawMessage   `json:"input,omitempty"`
	Vars          map[string]string `json:"vars,omitempty"`
	Priority      string            `json:"priority,omitempty"`
	TriggerSource string            `json:"trigger_source"`
	RequestedAt   Timestamp         `json:"requested_at"`
	Actor         *Actor            `json:"actor,omitempty"`
}

// SubjectGeneration names one generation of a subject.
type SubjectGeneration struct {
	QualifiedID string `json:"qualified_id"`
	Generation  uint64 `json:"generation"`
}

// Reservation is the exact repository / base ref / head ref an item writes.
type Reservation struct {
	Repository string `json:"repository"`
	BaseRef    string `json:"base_ref"`
	HeadRef    string `json:"head_ref"`
}

// LeaseFence is the queue lease part of an execution fence.
type LeaseFence struct {
	EntryID    string    `json:"entry_id"`
	OwnerID    string    `json:"owner_id"`
	Generation uint64    `json:"generation"`
	ExpiresAt  FenceTime `json:"expires_at"`
}

// Fence is an execution fence (ExecutionFence on the wire).
type Fence struct {
	Schema             string             `json:"schema"`
	Version            uint64             `json:"version"`
	WorkflowID         string             `json:"workflow_id"`
	WorkflowGeneration uint64             `json:"workflow_generation"`
	Subject            *SubjectGeneration `json:"subject,omitempty"`
	QueueLease         *LeaseFence        `json:"queue_lease,omitempty"`
	Repository         *Reservation       `json:"repository,omitempty"`
}

// Entry is a live queue entry (QueueEntry on the wire).
type Entry struct {
	EntryID         string          `json:"entry_id"`
	SubjectID       string          `json:"subject_id"`
	SubjectDispatch json.RawMessage `json:"subject_dispatch"`
	Status          string          `json:"status"`
	TaskID          string          `json:"task_id,omitempty"`
	WorkflowID      string          `json:"workflow_id,omitempty"`
	EnqueuedAt      EntryTime       `json:"enqueued_at"`
	AssignedAt      *EntryTime      `json:"assigned_at,omitempty"`
	HeldAt          *EntryTime      `json:"held_at,omitempty"`
	RunAt           string          `json:"run_at,omitempty"`
	ExpireAfterSecs *uint64         `json:"expire_after_secs,omitempty"`
	// TraceParent is the W3C traceparent of the item's trace (gitlease's
	// addition to QueueEntry, which is not strict; omitted when none), so a
	// remote worker's command joins it as the built-in worker's does.
	TraceParent string `json:"trace_parent,omitempty"`
}

// Stats counts the live queue (QueueStats on the wire).
type Stats struct {
	Total    int64 `json:"total"`
	Pending  int64 `json:"pending"`
	Assigned int64 `json:"assigned"`
	Held     int64 `json:"held"`
	Deferred int64 `json:"deferred"`
}

// FencedEntry is one leased entry and the fence that owns it.
type FencedEntry struct {
	Entry     Entry `json:"entry"`
	Execution Fence `json:"execution"`
}

// Block reasons of a v2 lease (QueueLeaseBlock.reason).
const (
	BlockSubjectGenerationActive  = "subject_generation_active"
	BlockRepositoryRefCollision   = "repository_ref_collision"
	BlockMissingExecutionIdentity = "missing_execution_identity"
)

// LeaseBlock reports a candidate a v2 lease skipped, and why.
type LeaseBlock struct {
	EntryID       string `json:"entry_id"`
	Reason        string `json:"reason"`
	ConflictsWith *Fence `json:"conflicts_with,omitempty"`
}

// Outcome of a fenced mutation (QueueLeaseMutationResponse.outcome).
type Outcome string

// The outcomes of renew, recover, completion and release_pending.
const (
	OutcomeApplied        Outcome = "applied"
	OutcomeAlreadyApplied Outcome = "already_applied"
	OutcomeNotFound       Outcome = "not_found"
	OutcomeStaleFence     Outcome = "stale_fence"
	OutcomeLeaseStillLive Outcome = "lease_still_live"
	OutcomeNotAssigned    Outcome = "not_assigned"
)

// MutationResult is the answer to a fenced mutation.
type MutationResult struct {
	Outcome   Outcome `json:"outcome"`
	Execution *Fence  `json:"execution,omitempty"`
	Reason    string  `json:"reason,omitempty"`
}

// Timestamp is an RFC 3339 instant, accepted with any offset and written in
// UTC with a Z and 0, 3, 6 or 9 fraction digits.
type Timestamp struct{ time.Time }

// FenceTime is written like Timestamp (fence expiries use Z).
type FenceTime = Timestamp

// EntryTime is an entry timestamp, written with a +00:00 offset as the
// reference queue writes enqueued_at, assigned_at and held_at.
type EntryTime struct{ time.Time }
