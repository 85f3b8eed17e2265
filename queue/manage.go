package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
)

// Operator methods over the live queue: list, stats, hold, release, drop,
// reorder and next_deadline. They act on v2 items too.

// Change is the answer of an operator mutation (QueueMutationResponse).
type Change struct {
	Changed  bool `json:"changed"`
	NotFound bool `json:"not_found"`
}

// NotPendingError is returned by Hold and Release for an assigned item, and
// by MarkAssigned for a held one (QUEUE_ENTRY_NOT_PENDING).
type NotPendingError struct{ EntryID string }

func (e *NotPendingError) Error() string {
	return fmt.Sprintf("queue entry %s is not in the expected pre-mutation status", e.EntryID)
}

// ListParams filters and pages List.
type ListParams struct {
	Status []string
	Limit  *uint64 // default 500, clamped to 1..2000
	Offset uint64
}

// ListResult is a page of live entries in queue order.
type ListResult struct {
	Entries []Entry `json:"entries"`
	Total   int64   `json:"total"` // matches before paging
	Stats   Stats   `json:"stats"` // the whole queue
}

// List returns live entries in queue order, filtered by status.
func (s *Store) List(ctx context.Context, p ListParams) (ListResult, error) {
	limit := int64(500)
	if p.Limit != nil {
		limit = int64(min(max(*p.Limit, 1), 2000))
	}
	statuses := p.Status
	if statuses == nil {
		statuses = []string{}
	}
	res := ListResult{Entries: []Entry{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		rows, err := s.q.WorkItemList(ctx, tx, dbq.WorkItemListParams{Statuses: statuses, Lim: int32(limit), Off: int32(min(p.Offset, 1<<31-1))})
		if err != nil {
			return fmt.Errorf("list work items: %w", err)
		}
		for _, w := range rows {
			res.Entries = append(res.Entries, entryOf(w))
		}
		if res.Total, err = s.q.WorkItemCount(ctx, tx, statuses); err != nil {
			return fmt.Errorf("count work items: %w", err)
		}
		res.Stats, err = s.stats(ctx, tx)
		return err
	})
	return res, err
}

// Stats counts the live queue.
func (s *Store) Stats(ctx context.Context) (Stats, error) { return s.stats(ctx, s.pool) }

func (s *Store) stats(ctx context.Context, db dbq.DBTX) (Stats, error) {
	return ReadStats(ctx, db, s.now())
}

// ReadStats counts the live queue through db as of now, for readers
// without a Store (the metrics scrape).
func ReadStats(ctx context.Context, db dbq.DBTX, now time.Time) (Stats, error) {
	r, err := dbq.New().WorkItemStats(ctx, db, now)
	if err != nil {
		return Stats{}, fmt.Errorf("count queue: %w", err)
	}
	return Stats{Total: r.Total, Pending: r.Pending, Assigned: r.Assigned, Held: r.Held, Deferred: r.Deferred}, nil
}

// Hold pauses a pending item. Holding a held item changes nothing; an
// assigned one is *NotPendingError; an unknown or finished one is NotFound.
func (s *Store) Hold(ctx context.Context, entryID string) (Change, error) {
	return s.toggle(ctx, entryID, StatusHeld, func(id uuid.UUID, now time.Time) (dbq.WorkItem, error) {
		return s.q.WorkItemHold(ctx, s.pool, dbq.WorkItemHoldParams{ID: id, Now: now})
	})
}

// Release returns a held item to pending. Releasing a pending item changes
// nothing; an assigned one is *NotPendingError; unknown is NotFound.
func (s *Store) Release(ctx context.Context, entryID string) (Change, error) {
	ch, err := s.toggle(ctx, entryID, StatusPending, func(id uuid.UUID, _ time.Time) (dbq.WorkItem, error) {
		return s.q.WorkItemRelease(ctx, s.pool, id)
	})
	if err == nil && ch.Changed {
		s.cfg.OnPending()
	}
	return ch, err
}

// toggle moves an item between pending and held.
func (s *Store) toggle(ctx context.Context, entryID, target string, update func(uuid.UUID, time.Time) (dbq.WorkItem, error)) (Change, error) {
	id, err := uuid.Parse(entryID)
	if err != nil {
		return Change{NotFound: true}, nil
	}
	if _, err := update(id, s.now()); err == nil {
		return Change{Changed: true}, nil
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return Change{}, fmt.Errorf("set work item %s: %w", target, err)
	}
	w, err := s.q.WorkItemGet(ctx, s.pool, id)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || (err == nil && IsTerminal(w.Status)):
		return Change{NotFound: true}, nil
	case err != nil:
		return Change{}, fmt.Errorf("read work item: %w", err)
	case w.Status == StatusAssigned:
		return Change{}, &NotPendingError{EntryID: entryID}
	}
	return Change{}, nil // already in the target state
}

// Drop finishes a live item in any status with outcome dropped. An unknown
// or already finished item is NotFound.
func (s *Store) Drop(ctx context.Context, entryID string) (Change, error) {
	id, err := uuid.Parse(entryID)
	if err != nil {
		return Change{NotFound: true}, nil
	}
	var ch Change
	err = s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		w, err := s.q.WorkItemDrop(ctx, tx, dbq.WorkItemDropParams{ID: id, Now: s.now()})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			ch.NotFound = true
			return nil
		case err != nil:
			return fmt.Errorf("drop work item: %w", err)
		}
		ch.Changed = true
		return s.cfg.Observer.Finished(ctx, tx, Item{row: w})
	})
	return ch, err
}

// Reorder moves the named live items to the front of the queue in the given
// order; the others keep their relative order, and unknown IDs are ignored.
// It returns how many live items changed position.
func (s *Store) Reorder(ctx context.Context, entryIDs []string) (int, error) {
	changed := 0
	err := s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		rows, err := s.q.WorkItemLivePositions(ctx, tx)
		if err != nil {
			return fmt.Errorf("read queue order: %w", err)
		}
		index := make(map[uuid.UUID]int, len(rows))
		for i, r := range rows {
			index[r.ID] = i
		}
		var front []uuid.UUID
		seen := map[uuid.UUID]bool{}
		for _, s := range entryIDs {
			id, err := uuid.Parse(s)
			if _, live := index[id]; err != nil || !live || seen[id] {
				continue
			}
			seen[id] = true
			front = append(front, id)
		}
		if len(front) == 0 {
			return nil
		}
		// New order: front, then the rest as they were. Count who moved.
		pos := 0
		for _, id := range front {
			if index[id] != pos {
				changed++
			}
			pos++
		}
		for i, r := range rows {
			if seen[r.ID] {
				continue
			}
			if i != pos {
				changed++
			}
			pos++
		}
		base := rows[0].Position - int64(len(front))
		for i, id := range front {
			if err := s.q.WorkItemSetPosition(ctx, tx, dbq.WorkItemSetPositionParams{ID: id, Position: base + int64(i)}); err != nil {
				return fmt.Errorf("move work item: %w", err)
			}
		}
		return nil
	})
	return changed, err
}

// NextDeadline sweeps expired entries and returns the earliest future run_at
// of a pending item, or nil when none is deferred.
func (s *Store) NextDeadline(ctx context.Context) (*time.Time, error) {
	now := s.now()
	var next *time.Time
	err := s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := s.sweep(ctx, tx, now); err != nil {
			return err
		}
		t, err := s.q.WorkItemNextDeadline(ctx, tx, now)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read next deadline: %w", err)
		}
		next = t
		return nil
	})
	return next, err
}

// ExpiredLeases returns up to limit assigned items whose lease has expired
// and whose owner ID starts with ownerPrefix, oldest expiry first: the work
// a sweeper may recover.
func (s *Store) ExpiredLeases(ctx context.Context, ownerPrefix string, limit int) ([]Item, error) {
	rows, err := s.q.WorkItemExpiredLeases(ctx, s.pool, dbq.WorkItemExpiredLeasesParams{
		Now: s.now(), OwnerPrefix: ownerPrefix, Lim: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("find expired leases: %w", err)
	}
	items := make([]Item, len(rows))
	for i, w := range rows {
		items[i] = Item{row: w}
	}
	return items, nil
}
