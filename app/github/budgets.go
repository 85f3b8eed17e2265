package github

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/db/dbq"
)

// budgetTimeout bounds one recording: the GitHub call that learned the
// budget waits for it.
const budgetTimeout = 2 * time.Second

// Pauser keeps an installation's items from being leased until a deadline
// (queue.Store.PauseInstallation), on every instance.
type Pauser interface {
	PauseInstallation(ctx context.Context, installationID int64, until time.Time) error
}

// Budgets is the BudgetRecorder over PostgreSQL: it keeps each
// installation's budget in github_budgets, which it alone writes (the
// dashboard and /metrics read it), and tells pauser of every limit, so
// leases pass the installation's items over until it lifts. A failure to
// record is logged and otherwise ignored: the limiter in the process holds
// the limit whatever the database says.
type Budgets struct {
	pool   *pgxpool.Pool
	q      *dbq.Queries
	pauser Pauser
	logger *slog.Logger
}

var _ BudgetRecorder = (*Budgets)(nil)

// NewBudgets returns the recorder writing through pool; pauser may be nil.
func NewBudgets(pool *pgxpool.Pool, pauser Pauser, logger *slog.Logger) *Budgets {
	return &Budgets{pool: pool, q: dbq.New(), pauser: pauser, logger: logger}
}

// RecordBudget writes b, and pauses its installation's leases until
// b.LimitedUntil when it is set.
func (r *Budgets) RecordBudget(ctx context.Context, b Budget) {
	ctx, cancel := context.WithTimeout(ctx, budgetTimeout)
	defer cancel()
	p := dbq.GitHubBudgetRecordParams{InstallationID: b.InstallationID, ResetAt: b.Reset, ObservedAt: b.Observed.UTC()}
	if b.Remaining != nil {
		n := int32(min(*b.Remaining, 1<<31-1))
		p.Remaining = &n
	}
	if b.Limit != nil {
		n := int32(min(*b.Limit, 1<<31-1))
		p.Limit = &n
	}
	if !b.LimitedUntil.IsZero() {
		p.LimitedUntil, p.LimitedReason = &b.LimitedUntil, &b.Reason
	}
	if err := r.q.GitHubBudgetRecord(ctx, r.pool, p); err != nil {
		r.logger.Warn("record GitHub budget", "installation_id", b.InstallationID, "error", err)
	}
	if r.pauser != nil && !b.LimitedUntil.IsZero() {
		if err := r.pauser.PauseInstallation(ctx, b.InstallationID, b.LimitedUntil); err != nil {
			r.logger.Warn("pause a rate-limited installation's leases", "installation_id", b.InstallationID, "until", b.LimitedUntil, "error", err)
		} else {
			r.logger.Info("GitHub limits an installation: its items wait", "installation_id", b.InstallationID, "until", b.LimitedUntil, "reason", b.Reason)
		}
	}
}

// ReadBudgets lists up to limit installations' budgets as recorded, by
// installation ID, through db (the metrics scrape, the dashboard).
func ReadBudgets(ctx context.Context, db dbq.DBTX, limit int) ([]Budget, error) {
	rows, err := dbq.New().GitHubBudgets(ctx, db, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("read GitHub budgets: %w", err)
	}
	out := make([]Budget, len(rows))
	for i, r := range rows {
		b := Budget{InstallationID: r.InstallationID, Reset: r.ResetAt, Observed: r.ObservedAt}
		if r.Remaining != nil {
			n := int(*r.Remaining)
			b.Remaining = &n
		}
		if r.Limit != nil {
			n := int(*r.Limit)
			b.Limit = &n
		}
		if r.LimitedUntil != nil {
			b.LimitedUntil = *r.LimitedUntil
		}
		if r.LimitedReason != nil {
			b.Reason = *r.LimitedReason
		}
		out[i] = b
	}
	return out, nil
}
