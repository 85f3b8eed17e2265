-- name: GitHubBudgetRecord :exec
-- The latest answer's budget of an installation; a limit already recorded
-- for later stands.
INSERT INTO github_budgets (installation_id, remaining, "limit", reset_at, limited_until, limited_reason, observed_at)
VALUES (@installation_id, sqlc.narg('remaining'), sqlc.narg('limit'), sqlc.narg('reset_at'),
        sqlc.narg('limited_until'), sqlc.narg('limited_reason'), @observed_at)
ON CONFLICT (installation_id) DO UPDATE SET
    remaining = coalesce(excluded.remaining, github_budgets.remaining),
    "limit" = coalesce(excluded."limit", github_budgets."limit"),
    reset_at = coalesce(excluded.reset_at, github_budgets.reset_at),
    limited_until = CASE WHEN excluded.limited_until > coalesce(github_budgets.limited_until, '-infinity')
                         THEN excluded.limited_until ELSE github_budgets.limited_until END,
    limited_reason = CASE WHEN excluded.limited_until > coalesce(github_budgets.limited_until, '-infinity')
                          THEN excluded.limited_reason ELSE github_budgets.limited_reason END,
    observed_at = excluded.observed_at;

-- name: GitHubBudgets :many
SELECT * FROM github_budgets ORDER BY installation_id LIMIT @lim;
