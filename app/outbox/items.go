package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

// Items reads what GitHub holds for work items (their branch, pull request
// and check run), which this package records in its own table,
// github_items, joined to work_items by entry ID.
type Items struct {
	pool *pgxpool.Pool
	q    *dbq.Queries
}

// NewItems returns an Items reading through pool.
func NewItems(pool *pgxpool.Pool) *Items { return &Items{pool: pool, q: dbq.New()} }

var (
	_ queue.ViewDecorator      = (*Items)(nil)
	_ webhook.CheckSuiteLookup = (*Items)(nil)
)

// EntryOnCommit returns the newest entry of repositoryID whose check run
// sits on headSHA ("" when none), read in tx: the entry of a Re-run of
// this App's check suite there (webhook.HandlerConfig.CheckSuites).
func (i *Items) EntryOnCommit(ctx context.Context, tx pgx.Tx, repositoryID int64, headSHA string) (string, error) {
	id, err := i.q.GitHubItemEntryOnCommit(ctx, tx, dbq.GitHubItemEntryOnCommitParams{
		RepositoryID: strconv.FormatInt(repositoryID, 10), HeadSha: headSHA,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("find the entry with a check run on %s: %w", headSHA, err)
	}
	return id.String(), nil
}

// CheckRunOf returns the id of entryID's recorded check run, 0 when it has
// none (webhook.CheckSuiteLookup: a Re-run acts only on that check run).
func (i *Items) CheckRunOf(ctx context.Context, tx pgx.Tx, entryID string) (int64, error) {
	id, err := uuid.Parse(entryID)
	if err != nil {
		return 0, nil
	}
	g, err := itemState(ctx, i.q, tx, id)
	if err != nil {
		return 0, err
	}
	return dbq.Deref(g.CheckRunID), nil
}

// DecorateView fills in v's Provisioning and CheckRunID, when known, so
// gitlease/entry/get shows them (queue.Config.Views).
func (i *Items) DecorateView(ctx context.Context, v *queue.View) error {
	id, err := uuid.Parse(v.EntryID)
	if err != nil {
		return nil
	}
	g, err := itemState(ctx, i.q, i.pool, id)
	if err != nil {
		return err
	}
	p := queue.Provisioning{Branch: dbq.Deref(g.Branch), HeadSHA: dbq.Deref(g.HeadSha), PullRequestURL: dbq.Deref(g.PrUrl)}
	if g.PrNumber != nil {
		p.PullRequestNumber = int(*g.PrNumber)
	}
	if p != (queue.Provisioning{}) {
		v.Provisioning = &p
	}
	v.CheckRunID = dbq.Deref(g.CheckRunID)
	return nil
}

// itemState returns the GitHub record of the item with entry id; the zero
// record (no branch, no check run) when there is none yet.
func itemState(ctx context.Context, q *dbq.Queries, db dbq.DBTX, id uuid.UUID) (dbq.GithubItem, error) {
	g, err := q.GitHubItemGet(ctx, db, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return dbq.GithubItem{EntryID: id}, nil
	}
	if err != nil {
		return g, fmt.Errorf("read the item's GitHub record: %w", err)
	}
	return g, nil
}
