package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
)

// ErrNotFailed is returned by RetryTx for an outbox row that does not exist
// or has not failed (it is pending or done): there is nothing to send again.
var ErrNotFailed = errors.New("outbox row is not a failed GitHub write")

// RetryTx makes a failed GitHub write pending and due now, inside the
// caller's transaction, so the sender tries it again; its attempts and
// GitHub's last answer stay until the next answer. It returns the entry the
// write belongs to (nil for a write about no item), or ErrNotFailed.
func (o *Outbox) RetryTx(ctx context.Context, tx pgx.Tx, id int64) (*uuid.UUID, error) {
	row, err := o.q.OutboxRetryFailed(ctx, tx, dbq.OutboxRetryFailedParams{ID: id, Now: o.now().UTC().Truncate(time.Microsecond)})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFailed
	}
	if err != nil {
		return nil, fmt.Errorf("retry outbox row %d: %w", id, err)
	}
	return row.EntryID, nil
}

// Backlog counts the outbox rows still to send and those given up on.
type Backlog struct{ Pending, Failed int64 }

// ReadBacklog counts the outbox backlog through db, for the metrics scrape.
func ReadBacklog(ctx context.Context, db dbq.DBTX) (Backlog, error) {
	b, err := dbq.New().OutboxBacklog(ctx, db)
	if err != nil {
		return Backlog{}, fmt.Errorf("count the outbox backlog: %w", err)
	}
	return Backlog{Pending: b.Pending, Failed: b.Failed}, nil
}
