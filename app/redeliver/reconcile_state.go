package redeliver

import (
	"context"
	"fmt"
	"time"

	"github.com/gitlease/gitlease/db/dbq"
)

// Redelivery is the reconciler's record of one delivery it requested,
// skipped or gave up on, for operators (the dashboard).
type Redelivery struct {
	GUID, Event, Action string
	// Requests is how many redeliveries were requested; Result the last
	// state (a Result* constant, "request_failed", or "requesting" while a
	// request is under way).
	Requests       int
	Result         string
	Detail         string
	LastAttemptID  int64
	LastStatusCode int
	FirstSeenAt    time.Time
	UpdatedAt      time.Time
}

// RecentRedeliveries returns up to limit of the reconciler's records
// changed since since, newest first. It returns an error when db cannot be
// read.
func RecentRedeliveries(ctx context.Context, db dbq.DBTX, since time.Time, limit int) ([]Redelivery, error) {
	rows, err := dbq.New().RedeliveryList(ctx, db, dbq.RedeliveryListParams{Since: since, Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list redeliveries: %w", err)
	}
	out := make([]Redelivery, len(rows))
	for i, r := range rows {
		out[i] = Redelivery{
			GUID: r.Guid, Event: r.Event, Action: dbq.Deref(r.Action), Requests: int(r.Requests), Result: r.Result,
			Detail: dbq.Deref(r.Detail), LastAttemptID: r.LastAttemptID, LastStatusCode: int(r.LastStatusCode),
			FirstSeenAt: r.FirstSeenAt, UpdatedAt: r.UpdatedAt,
		}
	}
	return out, nil
}

// ReconcileSummary is the reconciler's state in brief: its last scan (zero
// before the first) and the guids it found missed, redelivered and could
// not recover, over the records it keeps.
type ReconcileSummary struct {
	LastScan      time.Time
	Missed        int64
	Redelivered   int64
	Unrecoverable int64
}

// Summary reads the reconciler's state in brief. It returns an error when
// the database cannot be read.
func (r *Reconciler) Summary(ctx context.Context) (ReconcileSummary, error) {
	row, err := r.q.RedeliverySummary(ctx, r.pool)
	if err != nil {
		return ReconcileSummary{}, fmt.Errorf("summarise redeliveries: %w", err)
	}
	s := ReconcileSummary{Missed: row.Missed, Redelivered: row.Redelivered, Unrecoverable: row.Unrecoverable}
	if row.LastScan.After(time.Unix(0, 0)) {
		s.LastScan = row.LastScan
	}
	return s, nil
}
