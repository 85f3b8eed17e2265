package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/db"
	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
)

// installationsShown bounds the overview's installations table.
const installationsShown = 200

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
	if o.Database, err = db.ReadServer(ctx, u.pool); err != nil {
		return o, err
	}
	loads, err := queue.ReadInstallations(ctx, u.pool, now, installationsShown)
	if err != nil {
		return o, err
	}
	budgets, err := github.ReadBudgets(ctx, u.pool, installationsShown)
	if err != nil {
		return o, err
	}
	o.Cap = u.store.MaxAssignedPerInstallation()
	o.Installations = viewInstallations(loads, budgets, o.Cap)
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
	switch {
	case f.Subject != "":
		rows, err := u.q.UIWorkItemsOfSubject(ctx, u.pool, dbq.UIWorkItemsOfSubjectParams{
			QualifiedID: f.Subject, Status: f.Status, BeforeAt: f.BeforeAt, BeforeID: f.BeforeID, Lim: lim})
		if err != nil {
			return nil, fmt.Errorf("list items of %s: %w", f.Subject, err)
		}
		out := rowsOf(rows, u.cfg.GitHubURL, now)
		if f.Kind != "" {
			out = slices.DeleteFunc(out, func(r itemRow) bool { return r.Kind != f.Kind })
		}
		return out, nil
	case f.Repository != "":
		rows, err := u.q.UIWorkItemsOfRepository(ctx, u.pool, dbq.UIWorkItemsOfRepositoryParams{
			Repository: f.Repository, Status: f.Status, Kind: f.Kind, BeforeAt: f.BeforeAt, BeforeID: f.BeforeID, Lim: lim})
		if err != nil {
			return nil, fmt.Errorf("list items of %s: %w", f.Repository, err)
		}
		return rowsOf(rows, u.cfg.GitHubURL, now), nil
	case f.Status != "":
		rows, err := u.q.UIWorkItemsNewestByStatus(ctx, u.pool, dbq.UIWorkItemsNewestByStatusParams{
			Status: f.Status, BeforeAt: f.BeforeAt, BeforeID: f.BeforeID, Kind: f.Kind, Lim: lim})
		if err != nil {
			return nil, fmt.Errorf("list %s items: %w", f.Status, err)
		}
		return rowsOf(rows, u.cfg.GitHubURL, now), nil
	}
	rows, err := u.q.UIWorkItemsNewest(ctx, u.pool, dbq.UIWorkItemsNewestParams{
		BeforeAt: f.BeforeAt, BeforeID: f.BeforeID, Kind: f.Kind, Lim: lim})
	if err != nil {
		return nil, fmt.Errorf("list items: %w", err)
	}
	return rowsOf(rows, u.cfg.GitHubURL, now), nil
}

// listedItem is the shape of every items query's row (db/queries/ui.sql
// names the same columns in each): the item and what GitHub holds for it.
type listedItem = struct {
	ID                uuid.UUID
	SubjectID         string
	CanonicalID       *string
	SubjectGeneration *int64
	Status            string
	Dispatch          []byte
	Repository        *string
	BaseRef           *string
	HeadRef           *string
	LeaseOwner        *string
	LeaseExpiresAt    *time.Time
	EnqueuedAt        time.Time
	AssignedAt        *time.Time
	HeldAt            *time.Time
	FinishedAt        *time.Time
	PrNumber          *int32
	PrUrl             *string
	CheckRunID        *int64
	Branch            *string
}

// rowsOf turns any items query's rows into list rows.
func rowsOf[R ~listedItem](rows []R, web string, now time.Time) []itemRow {
	out := make([]itemRow, 0, len(rows))
	for _, r := range rows {
		l := listedItem(r)
		out = append(out, rowOf(l, l.PrNumber, l.PrUrl, l.CheckRunID, web, now))
	}
	return out
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
	w, err := u.q.UIWorkItem(ctx, u.pool, id)
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
	d.Row = rowOf(listedItem(w), prNumber, prURL, &d.View.CheckRunID, u.cfg.GitHubURL, u.cfg.Now())
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
		d.Generations = slices.DeleteFunc(rowsOf(gens, u.cfg.GitHubURL, u.cfg.Now()), func(r itemRow) bool { return r.EntryID == d.Row.EntryID })
	}
	return d, nil
}

func itoa(n int) string     { return strconv.Itoa(n) }
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
