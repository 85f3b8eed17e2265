package queue

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
)

// CancelInstallationTx acts, inside the caller's transaction, on a GitHub
// App installation that was deleted or suspended, or (repositoryIDs not
// empty) on repositories removed from it: the pending and held items whose
// dispatch metadata names that installation (and one of those
// repositories) finish with outcome cancelled, and its assigned items are
// marked so that their next Renew ends them, as CancelSubjectTx does for
// one subject; reason is how they ended.
func (s *Store) CancelInstallationTx(ctx context.Context, tx pgx.Tx, installationID int64, repositoryIDs []int64, reason string) (CancelResult, error) {
	now := s.now()
	inst := strconv.FormatInt(installationID, 10)
	repos := make([]string, 0, len(repositoryIDs)) // never nil: NULL would match nothing
	for _, id := range repositoryIDs {
		repos = append(repos, strconv.FormatInt(id, 10))
	}
	rows, err := s.q.WorkItemCancelInstallation(ctx, tx, dbq.WorkItemCancelInstallationParams{Now: now, InstallationID: inst, RepositoryIds: repos})
	if err != nil {
		return CancelResult{}, fmt.Errorf("cancel the items of installation %d: %w", installationID, err)
	}
	req, err := s.q.WorkItemRequestCancelInstallation(ctx, tx, dbq.WorkItemRequestCancelInstallationParams{Now: now, InstallationID: inst, RepositoryIds: repos})
	if err != nil {
		return CancelResult{}, fmt.Errorf("request cancel of installation %d's items: %w", installationID, err)
	}
	return s.cancelled(ctx, tx, rows, req, reason)
}
