package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
)

// readOverview gathers the overview. Live counts come from the live partial
// indexes on every view; the counts of finished items (one index-only scan
// of every item) are reused for CountsTTL.
func (u *UI) readOverview(ctx context.Context) (overviewData, error) {
	now := u.cfg.Now()
	o := overviewData{Live: map[string]int64{}, Statuses: statuses, Outcomes: outcomes,
		Deliveries: map[string]int64{}, Outbox: map[string]int64{}}
	live, err := u.q.UIWorkItemCountsLive(ctx, u.pool)
	if err != nil {
		return o, fmt.Errorf("count live items: %w", err)
	}
	for _, r := range live {
		o.Live[r.Status] = r.N
	}
	if o.All, o.CountsAt, err = u.allCounts(ctx, now); err != nil {
		return o, err
	}
	o.Counts = map[string]int64{}
	for _, st := range statuses {
		if queue.IsTerminal(st) {
			o.Counts[st] = o.All[st]
		} else {
			o.Counts[st] = o.Live[st]
		}
	}
	del, err := u.q.UIDeliveryOutcomesSince(ctx, u.pool, now.Add(-time.Hour))
	if err != nil {
		return o, fmt.Errorf("count deliveries: %w", err)
	}
	for _, r := range del {
		o.Deliveries[r.Outcome] = r.N
	}
	ob, err := u.q.UIOutboxCountsOpen(ctx, u.pool)
	if err != nil {
		return o, fmt.Errorf("count GitHub writes: %w", err)
	}
	for _, r := range ob {
		o.Outbox[r.Status] = r.N
	}
	switch t, err := u.q.UIWorkItemOldestPending(ctx, u.pool); {
	case err == nil:
		o.OldestPending = &t
	case !errors.Is(err, pgx.ErrNoRows):
		return o, fmt.Errorf("find the oldest pending item: %w", err)
	}
	if o.Owners, err = u.q.UIWorkItemLeaseOwners(ctx, u.pool, now); err != nil {
		return o, fmt.Errorf("list lease owners: %w", err)
	}
	return o, nil
}

// allCounts returns every item's count by status, from the cache while it
// is younger than CountsTTL; concurrent viewers share one query.
func (u *UI) allCounts(ctx context.Context, now time.Time) (map[string]int64, time.Time, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.counts.bySt != nil && now.Sub(u.counts.at) < u.cfg.CountsTTL {
		return u.counts.bySt, u.counts.at, nil
	}
	rows, err := u.q.UIWorkItemCountsAll(ctx, u.pool)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("count items: %w", err)
	}
	m := map[string]int64{}
	for _, r := range rows {
		m[r.Status] = r.N
	}
	u.counts = cachedCounts{at: now, bySt: m}
	return m, now, nil
}

// readItems reads one page (plus one row, to know whether there is a
// next) of the items filter f asks for, newest first.
func (u *UI) readItems(ctx context.Context, f itemFilter) ([]itemRow, error) {
	now, lim := u.cfg.Now(), int32(u.cfg.PageSize+1)
	var out []itemRow
	switch {
	case f.Subject != "":
		rows, err := u.q.UIWorkItemsOfSubject(ctx, u.pool, dbq.UIWorkItemsOfSubjectParams{
			QualifiedID: f.Subject, Status: f.Status, BeforeAt: f.BeforeAt, BeforeID: f.BeforeID, Lim: lim})
		if err != nil {
			return nil, fmt.Errorf("list items of %s: %w", f.Subject, err)
		}
		for _, r := range rows {
			if f.Kind == "" || r.WorkItem.CanonicalID == nil || kindOf(*r.WorkItem.CanonicalID) == f.Kind {
				out = append(out, rowOf(r.WorkItem, r.PrNumber, r.PrUrl, r.CheckRunID, now))
			}
		}
	case f.Repository != "":
		rows, err := u.q.UIWorkItemsOfRepository(ctx, u.pool, dbq.UIWorkItemsOfRepositoryParams{
			Repository: f.Repository, Status: f.Status, Kind: f.Kind, BeforeAt: f.BeforeAt, BeforeID: f.BeforeID, Lim: lim})
		if err != nil {
			return nil, fmt.Errorf("list items of %s: %w", f.Repository, err)
		}
		for _, r := range rows {
			out = append(out, rowOf(r.WorkItem, r.PrNumber, r.PrUrl, r.CheckRunID, now))
		}
	case f.Status != "":
		rows, err := u.q.UIWorkItemsNewestByStatus(ctx, u.pool, dbq.UIWorkItemsNewestByStatusParams{
			Status: f.Status, BeforeAt: f.BeforeAt, BeforeID: f.BeforeID, Kind: f.Kind, Lim: lim})
		if err != nil {
			return nil, fmt.Errorf("list %s items: %w", f.Status, err)
		}
		for _, r := range rows {
			out = append(out, rowOf(r.WorkItem, r.PrNumber, r.PrUrl, r.CheckRunID, now))
		}
	default:
		rows, err := u.q.UIWorkItemsNewest(ctx, u.pool, dbq.UIWorkItemsNewestParams{
			BeforeAt: f.BeforeAt, BeforeID: f.BeforeID, Kind: f.Kind, Lim: lim})
		if err != nil {
			return nil, fmt.Errorf("list items: %w", err)
		}
		for _, r := range rows {
			out = append(out, rowOf(r.WorkItem, r.PrNumber, r.PrUrl, r.CheckRunID, now))
		}
	}
	return out, nil
}

func kindOf(qualifiedID string) string {
	for i := range len(qualifiedID) {
		if qualifiedID[i] == ':' {
			return qualifiedID[:i]
		}
	}
	return ""
}

// readItem gathers the item page; queue.ErrNotFound for an unknown entry.
func (u *UI) readItem(ctx context.Context, id uuid.UUID) (itemData, error) {
	var d itemData
	var err error
	if d.View, err = u.store.View(ctx, id.String()); err != nil {
		return d, err
	}
	viewJSON, err := json.Marshal(d.View)
	if err != nil {
		return d, fmt.Errorf("encode the item's view: %w", err)
	}
	d.ViewJSON = prettyJSON(viewJSON)
	w, err := u.q.WorkItemGet(ctx, u.pool, id)
	if err != nil {
		return d, fmt.Errorf("read work item: %w", err)
	}
	d.Dispatch = prettyJSON(w.Dispatch)
	var prNumber *int32
	var prURL *string
	if p := d.View.Provisioning; p != nil {
		n := int32(p.PullRequestNumber)
		prNumber, prURL = &n, &p.PullRequestURL
	}
	d.Row = rowOf(w, prNumber, prURL, &d.View.CheckRunID, u.cfg.Now())
	d.Actions = actionsFor(d.Row)
	if d.Deliveries, err = u.q.UIDeliveriesOfEntry(ctx, u.pool, &id); err != nil {
		return d, fmt.Errorf("read the item's deliveries: %w", err)
	}
	if d.Audit, err = u.q.UIWorkItemAudit(ctx, u.pool, id); err != nil {
		return d, fmt.Errorf("read the item's audit log: %w", err)
	}
	if d.Writes, err = u.q.UIOutboxOfEntry(ctx, u.pool, &id); err != nil {
		return d, fmt.Errorf("read the item's GitHub writes: %w", err)
	}
	if w.CanonicalID != nil {
		gens, err := u.q.UIWorkItemsOfSubject(ctx, u.pool, dbq.UIWorkItemsOfSubjectParams{
			QualifiedID: *w.CanonicalID, BeforeAt: maxTime, BeforeID: uuid.Max, Lim: 100})
		if err != nil {
			return d, fmt.Errorf("read the subject's generations: %w", err)
		}
		for _, g := range gens {
			if g.WorkItem.ID != id {
				d.Generations = append(d.Generations, rowOf(g.WorkItem, g.PrNumber, g.PrUrl, g.CheckRunID, u.cfg.Now()))
			}
		}
	}
	return d, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func derefInt(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func itoa(n int) string     { return strconv.Itoa(n) }
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
