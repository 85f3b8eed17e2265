package queue

import (
	"strings"

	"github.com/gitlease/gitlease/db/dbq"
)

// Validate checks f as an ExecutionFence (queue v2 §2.2). With queueBacked it
// also requires the queue lease, as renew, recover, completion and
// release_pending do.
func (f Fence) Validate(queueBacked bool) error {
	switch {
	case f.Schema != FenceSchema:
		return invalidf("execution fence schema must be %q", FenceSchema)
	case f.Version != FenceVersion:
		return invalidf("execution fence version must be %d", FenceVersion)
	case strings.TrimSpace(f.WorkflowID) == "":
		return invalidf("execution fence workflow_id must not be blank")
	case f.WorkflowGeneration < 1:
		return invalidf("execution fence workflow_generation must be at least 1")
	}
	if s := f.Subject; s != nil {
		if _, _, ok := SplitQualifiedID(s.QualifiedID); !ok {
			return invalidf("execution fence subject.qualified_id %q must be <kind>:<id>", s.QualifiedID)
		}
		if s.Generation < 1 {
			return invalidf("execution fence subject.generation must be at least 1")
		}
	}
	if l := f.QueueLease; l != nil {
		switch {
		case strings.TrimSpace(l.EntryID) == "" || strings.TrimSpace(l.OwnerID) == "":
			return invalidf("execution fence queue_lease needs entry_id and owner_id")
		case l.Generation < 1:
			return invalidf("execution fence queue_lease.generation must be at least 1")
		}
	} else if queueBacked {
		return invalidf("execution fence is not queue-backed: queue_lease is required")
	}
	if r := f.Repository; r != nil {
		if err := ValidateReservation(*r); err != nil {
			return err
		}
	}
	return nil
}

// exactMatch is the compare-and-swap of every fenced mutation, in Go, for
// classifying a row the SQL compare-and-swap (work_item_fence_matches) did not
// take. Both must agree; expires_at is never compared.
func exactMatch(f Fence, w dbq.WorkItem) bool {
	if f.Subject == nil || f.QueueLease == nil || w.SubjectGeneration == nil || w.LeaseOwner == nil {
		return false
	}
	if f.WorkflowID != deref(w.WorkflowID) || int64(f.WorkflowGeneration) != derefInt(w.WorkflowGeneration) ||
		f.Subject.QualifiedID != deref(w.CanonicalID) || int64(f.Subject.Generation) != *w.SubjectGeneration ||
		f.QueueLease.EntryID != w.ID.String() || f.QueueLease.OwnerID != *w.LeaseOwner ||
		int64(f.QueueLease.Generation) != w.LeaseGeneration {
		return false
	}
	if f.Repository == nil || w.Repository == nil {
		return f.Repository == nil && w.Repository == nil
	}
	return strings.EqualFold(f.Repository.Repository, *w.Repository) &&
		f.Repository.BaseRef == deref(w.BaseRef) && f.Repository.HeadRef == deref(w.HeadRef)
}
