package queue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
)

// LeaseParams asks for up to Max due pending items (QueueLeaseV2Request).
type LeaseParams struct {
	Max         int
	OwnerID     string
	WorkflowIDs []string // exactly Max, non-blank, unique; one is used per newly started workflow
	Exclude     []Fence  // work the caller already runs elsewhere
}

// LeaseResult is what a lease handed out and what it skipped.
type LeaseResult struct {
	Leased  []FencedEntry `json:"leased"`
	Blocked []LeaseBlock  `json:"blocked,omitempty"`
}

// errInvalidLease describes a malformed lease request, as the reference words it.
const errInvalidLease = "queue v2 lease requires max 1..5, owner_id, and max unique workflow_ids"

func (p LeaseParams) validate() error {
	if p.Max < 1 || p.Max > MaxLeaseBatch || strings.TrimSpace(p.OwnerID) == "" || len(p.WorkflowIDs) != p.Max {
		return &InvalidError{Msg: errInvalidLease}
	}
	seen := make(map[string]bool, len(p.WorkflowIDs))
	for _, id := range p.WorkflowIDs {
		if strings.TrimSpace(id) == "" || seen[id] {
			return &InvalidError{Msg: errInvalidLease}
		}
		seen[id] = true
	}
	for i, f := range p.Exclude {
		if err := f.Validate(false); err != nil {
			return invalidf("exclude[%d]: %v", i, err)
		}
	}
	return nil
}

// scanSize is how many due pending candidates one lease call may examine:
// bounded, so the cost of a lease does not grow with the queue.
func scanSize(n int) int { return max(50, 10*n) }

// Lease hands out up to p.Max due pending items to p.OwnerID, each fenced
// with a lease generation one higher than before and an expiry of now plus
// the lease TTL, all in one transaction.
//
// It examines a bounded number of due pending candidates in queue order,
// locking them with SKIP LOCKED: concurrent Lease calls never wait on each
// other and never return the same item. Candidates that an Exclude fence
// conflicts with, or that have no usable subject, are reported in Blocked and
// left pending. Held, deferred and assigned items are never candidates:
// an expired lease comes back only through Recover. It returns *InvalidError
// for a malformed request.
func (s *Store) Lease(ctx context.Context, p LeaseParams) (_ LeaseResult, err error) {
	defer s.timed("lease", time.Now(), &err)
	if err := p.validate(); err != nil {
		return LeaseResult{}, err
	}
	owner := strings.TrimSpace(p.OwnerID)
	var res LeaseResult
	err = s.retryOnConflict(ctx, func(ctx context.Context, tx pgx.Tx) error {
		res = LeaseResult{Leased: []FencedEntry{}}
		now := s.now()
		if err := s.sweep(ctx, tx, now); err != nil {
			return err
		}
		var ids []uuid.UUID
		var wfids []string
		nextWF, scanned, after := 0, 0, int64(math.MinInt64)
		for len(ids) < p.Max && scanned < scanSize(p.Max) {
			want := min(p.Max-len(ids), scanSize(p.Max)-scanned)
			cands, err := s.q.WorkItemLeaseCandidates(ctx, tx, dbq.WorkItemLeaseCandidatesParams{Now: now, After: after, Scan: int32(want)})
			if err != nil {
				return fmt.Errorf("scan lease candidates: %w", err)
			}
			for _, c := range cands {
				scanned++
				after = c.Position
				if c.SubjectGeneration == nil {
					if c, err = s.grantIdentity(ctx, tx, c); err != nil {
						if b, ok := asBlock(err); ok {
							res.Blocked = append(res.Blocked, b)
							continue
						}
						return err
					}
				}
				if b := blockedBy(c, p.Exclude); b != nil {
					res.Blocked = append(res.Blocked, *b)
					continue
				}
				wf := dbq.Deref(c.WorkflowID)
				if wf == "" {
					wf = p.WorkflowIDs[nextWF]
					nextWF++
				}
				ids = append(ids, c.ID)
				wfids = append(wfids, wf)
			}
			if len(cands) < want {
				break // no more due pending items
			}
		}
		if len(ids) == 0 {
			return nil
		}
		rows, err := s.q.WorkItemLeaseMany(ctx, tx, dbq.WorkItemLeaseManyParams{
			OwnerID: owner, ExpiresAt: now.Add(s.cfg.LeaseTTL), Now: now, Ids: ids, WorkflowIds: wfids,
		})
		if err != nil {
			return fmt.Errorf("lease work items: %w", err)
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].Position < rows[j].Position })
		for _, w := range rows {
			if err := s.cfg.Observer.Leased(ctx, tx, Item{row: w}); err != nil {
				return fmt.Errorf("observe lease: %w", err)
			}
			res.Leased = append(res.Leased, FencedEntry{Entry: entryOf(w), Execution: *fenceOf(w)})
		}
		return nil
	})
	return res, err
}

type blockError struct{ b LeaseBlock }

func (e *blockError) Error() string { return "lease candidate blocked: " + e.b.Reason }

func asBlock(err error) (LeaseBlock, bool) {
	var be *blockError
	if errors.As(err, &be) {
		return be.b, true
	}
	return LeaseBlock{}, false
}

// grantIdentity gives a legacy candidate v2 identity (its canonical id and
// the subject's next generation), as the first v2 hand-out that reaches it.
func (s *Store) grantIdentity(ctx context.Context, tx pgx.Tx, c dbq.WorkItem) (dbq.WorkItem, error) {
	if c.CanonicalID == nil {
		return c, &blockError{LeaseBlock{EntryID: c.ID.String(), Reason: BlockMissingExecutionIdentity}}
	}
	switch holder, err := s.q.WorkItemLiveBySubject(ctx, tx, *c.CanonicalID); {
	case err == nil && holder.ID != c.ID && holder.SubjectGeneration != nil:
		return c, &blockError{LeaseBlock{EntryID: c.ID.String(), Reason: BlockSubjectGenerationActive, ConflictsWith: fenceOf(holder)}}
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return c, fmt.Errorf("look up live subject: %w", err)
	}
	gen, err := s.q.SubjectGenerationNext(ctx, tx, *c.CanonicalID)
	if err != nil {
		return c, fmt.Errorf("allocate subject generation: %w", err)
	}
	w, err := s.q.WorkItemGrantIdentity(ctx, tx, dbq.WorkItemGrantIdentityParams{ID: c.ID, SubjectGeneration: &gen})
	if err != nil {
		return c, fmt.Errorf("grant v2 identity: %w", err)
	}
	return w, nil
}

// blockedBy applies the exclude rules of a v2 lease to candidate c. A live
// item's reservation cannot collide with another live item's (a unique index
// forbids it), so only the caller's exclude fences can block on the ref.
func blockedBy(c dbq.WorkItem, exclude []Fence) *LeaseBlock {
	qid, gen := dbq.Deref(c.CanonicalID), uint64(dbq.Deref(c.SubjectGeneration))
	for i := range exclude {
		if f := exclude[i].Subject; f != nil && f.QualifiedID == qid && f.Generation == gen {
			return &LeaseBlock{EntryID: c.ID.String(), Reason: BlockSubjectGenerationActive, ConflictsWith: &exclude[i]}
		}
	}
	if c.CollisionKey == nil {
		return nil
	}
	for i := range exclude {
		if r := exclude[i].Repository; r != nil && collisionKey(*r) == *c.CollisionKey {
			return &LeaseBlock{EntryID: c.ID.String(), Reason: BlockRepositoryRefCollision, ConflictsWith: &exclude[i]}
		}
	}
	return nil
}

// collisionKey is the reservation's collision key: two live items never share one.
func collisionKey(r Reservation) string {
	return strings.ToLower(strings.TrimSpace(r.Repository)) + "\n" + r.HeadRef
}
