package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/db/pgtx"
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

// scanInstallations is how many installations (not idle, not paused) one
// round of a lease examines for due items, in turn order.
const scanInstallations = 50

// Lease hands out up to p.Max due pending items to p.OwnerID, each fenced
// with a lease generation one higher than before and an expiry of now plus
// the lease TTL, all in one transaction.
//
// It takes items in turns over installations (SPEC §7.1): the installation
// served least recently first, each installation's items in queue order;
// items enqueued over /rpc or stdio are installation 0. Installations whose
// GitHub credential is rate-limited (PauseInstallation) and, with
// Config.MaxAssignedPerInstallation, those at their cap are passed over. It
// examines a bounded number of candidates, locking them with SKIP LOCKED:
// concurrent Lease calls never wait on each other and never return the same
// item. Candidates that an Exclude fence conflicts with, or that have no
// usable subject, are reported in Blocked and left pending. Held, deferred
// and assigned items are never candidates: an expired lease comes back only
// through Recover. It returns *InvalidError for a malformed request.
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
		picked, short, err := s.leaseCandidates(ctx, tx, now, p, &res)
		if err != nil {
			return err
		}
		if s.cfg.MaxAssignedPerInstallation > 0 {
			if picked, err = s.withinCap(ctx, tx, picked); err != nil {
				return err
			}
		}
		if len(picked) == 0 {
			return nil
		}
		ids := make([]uuid.UUID, len(picked))
		wfids := make([]string, len(picked))
		var insts []int64
		for i, c := range picked {
			ids[i], wfids[i] = c.id, c.workflowID
			if !slices.Contains(insts, c.installation) {
				insts = append(insts, c.installation)
			}
		}
		// The setting travels with the hand-out: no round trip of its own.
		if err := s.q.WorkItemLeaseGenericPlans(ctx, pgtx.WithNext(tx)); err != nil {
			return fmt.Errorf("lease work items: %w", err)
		}
		rows, err := s.q.WorkItemLeaseMany(ctx, tx, dbq.WorkItemLeaseManyParams{
			OwnerID: owner, ExpiresAt: now.Add(s.cfg.LeaseTTL), Now: now, Ids: ids, WorkflowIds: wfids, InstallationIds: insts,
		})
		if err != nil {
			return fmt.Errorf("lease work items: %w", err)
		}
		turn := make(map[uuid.UUID]int, len(picked))
		for i, c := range picked {
			turn[c.id] = i
		}
		sort.Slice(rows, func(i, j int) bool { return turn[rows[i].ID] < turn[rows[j].ID] })
		for _, w := range rows {
			if err := s.cfg.Observer.Leased(ctx, tx, Item{row: w}); err != nil {
				return fmt.Errorf("observe lease: %w", err)
			}
			res.Leased = append(res.Leased, FencedEntry{Entry: entryOf(w), Execution: *fenceOf(w)})
		}
		// An installation that gave fewer items than its share may have
		// given its last: now that they are assigned, see.
		if len(short) > 0 {
			if _, err := s.retireDrained(ctx, tx, short); err != nil {
				return err
			}
		}
		return nil
	})
	return res, err
}

// leased is a candidate a lease hands out, with the workflow it runs in.
type leased struct {
	id           uuid.UUID
	installation int64
	workflowID   string
}

// leaseCandidates picks up to p.Max candidates in turn order, in rounds of
// the fair scan (work_item_lease_fair), each round passing over every
// candidate seen before; blocked candidates go to res.Blocked. It also
// returns the installations that gave a round fewer items than their share.
// A round that finds nothing, or what one installation had, ends the scan;
// the first time, drained installations at the head of the turn order are
// retired first and the round repeated if there were any, so they never
// hide the installations behind them.
func (s *Store) leaseCandidates(ctx context.Context, tx pgx.Tx, now time.Time, p LeaseParams, res *LeaseResult) (picked []leased, short []int64, err error) {
	seen := []uuid.UUID{} // never nil: NULL would pass over every item
	nextWF, retired := 0, false
	for len(picked) < p.Max && len(seen) < scanSize(p.Max) {
		want := min(p.Max-len(picked), scanSize(p.Max)-len(seen))
		cands, err := s.q.WorkItemLeaseFair(ctx, tx, dbq.WorkItemLeaseFairParams{
			Now: now, MaxItems: int32(want), Scan: scanInstallations,
			Cap: int32(s.cfg.MaxAssignedPerInstallation), Taken: seen,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("scan lease candidates: %w", err)
		}
		var insts []int64
		gave := map[int64]int{}
		for _, c := range cands {
			seen = append(seen, c.ID)
			if gave[c.InstallationID]++; gave[c.InstallationID] == 1 {
				insts = append(insts, c.InstallationID)
			}
			if c.SubjectGeneration == nil {
				if c, err = s.grantIdentity(ctx, tx, c); err != nil {
					if b, ok := asBlock(err); ok {
						res.Blocked = append(res.Blocked, b)
						continue
					}
					return nil, nil, err
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
			picked = append(picked, leased{id: c.ID, installation: c.InstallationID, workflowID: wf})
		}
		if len(insts) > 0 {
			share := (want + len(insts) - 1) / len(insts)
			for _, id := range insts {
				if gave[id] < share && !slices.Contains(short, id) {
					short = append(short, id)
				}
			}
		}
		if len(cands) == 0 || (len(insts) == 1 && len(cands) < want) {
			if retired {
				break
			}
			retired = true
			n, err := s.retireDrained(ctx, tx, nil)
			if err != nil {
				return nil, nil, err
			}
			if n == 0 {
				break
			}
		}
	}
	return picked, short, nil
}

// withinCap keeps, of picked, what leaves each installation (but
// installation 0) at most Config.MaxAssignedPerInstallation assigned items.
// It locks the installations' rows, skipping those another lease holds
// (their candidates are passed over), and counts their assigned items after
// taking the lock, so the count includes every lease committed before.
func (s *Store) withinCap(ctx context.Context, tx pgx.Tx, picked []leased) ([]leased, error) {
	var insts []int64
	for _, c := range picked {
		if c.installation != 0 && !slices.Contains(insts, c.installation) {
			insts = append(insts, c.installation)
		}
	}
	if len(insts) == 0 {
		return picked, nil
	}
	locked, err := s.q.LeaseInstallationsLock(ctx, tx, insts)
	if err != nil {
		return nil, fmt.Errorf("lock installations for the cap: %w", err)
	}
	room := make(map[int64]int, len(locked))
	for _, id := range locked {
		room[id] = s.cfg.MaxAssignedPerInstallation
	}
	counts, err := s.q.WorkItemAssignedByInstallation(ctx, tx, locked)
	if err != nil {
		return nil, fmt.Errorf("count assigned items by installation: %w", err)
	}
	for _, c := range counts {
		room[c.InstallationID] -= int(c.Assigned)
	}
	kept := picked[:0]
	for _, c := range picked {
		if c.installation == 0 {
			kept = append(kept, c)
		} else if room[c.installation] > 0 {
			room[c.installation]--
			kept = append(kept, c)
		}
	}
	return kept, nil
}

// retireDrained marks idle those of ids (none: the installations at the
// head of the turn order) that have no pending item left, so later scans
// pass them by index, and returns how many it marked.
func (s *Store) retireDrained(ctx context.Context, tx pgx.Tx, ids []int64) (int64, error) {
	if ids == nil {
		ids = []int64{}
	}
	drained, err := s.q.LeaseInstallationsDrained(ctx, tx, dbq.LeaseInstallationsDrainedParams{InstallationIds: ids, Scan: scanInstallations})
	if err != nil {
		return 0, fmt.Errorf("find drained installations: %w", err)
	}
	if len(drained) == 0 {
		return 0, nil
	}
	n, err := s.q.LeaseInstallationsRetire(ctx, tx, drained)
	if err != nil {
		return 0, fmt.Errorf("retire drained installations: %w", err)
	}
	return n, nil
}

// PauseInstallation keeps the items of GitHub installation id from being
// leased until until, on every instance: its credential is rate-limited
// (SPEC §7.1). A later deadline already recorded stands.
func (s *Store) PauseInstallation(ctx context.Context, id int64, until time.Time) error {
	if err := s.q.LeaseInstallationPause(ctx, s.pool, dbq.LeaseInstallationPauseParams{InstallationID: id, Until: until.UTC()}); err != nil {
		return fmt.Errorf("pause installation %d until %s: %w", id, until.UTC().Format(time.RFC3339), err)
	}
	return nil
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

// InstallationLoad is one installation's share of the queue: its pending
// and assigned items, and until when its leases are paused (nil: not).
// Installation 0 holds the items enqueued over /rpc and stdio.
type InstallationLoad struct {
	InstallationID    int64
	Pending, Assigned int64
	PausedUntil       *time.Time
}

// ReadInstallations lists, through db as of now, up to limit installations
// that have items pending or assigned or are paused, by installation ID,
// for readers without a Store (the metrics scrape, the dashboard).
func ReadInstallations(ctx context.Context, db dbq.DBTX, now time.Time, limit int) ([]InstallationLoad, error) {
	rows, err := dbq.New().LeaseInstallationsLoad(ctx, db, dbq.LeaseInstallationsLoadParams{Now: now, Lim: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("read installations' items: %w", err)
	}
	out := make([]InstallationLoad, len(rows))
	for i, r := range rows {
		out[i] = InstallationLoad{InstallationID: r.InstallationID, Pending: r.Pending, Assigned: r.Assigned, PausedUntil: r.PausedUntil}
		if r.PausedUntil != nil && !r.PausedUntil.After(now) {
			out[i].PausedUntil = nil
		}
	}
	return out, nil
}
