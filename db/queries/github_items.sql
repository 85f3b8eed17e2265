-- name: GitHubItemGet :one
SELECT * FROM github_items WHERE entry_id = @entry_id;

-- name: GitHubItemSetCheckRun :exec
INSERT INTO github_items (entry_id, check_run_id) VALUES (@entry_id, @check_run_id)
ON CONFLICT (entry_id) DO UPDATE SET check_run_id = EXCLUDED.check_run_id;

-- name: GitHubItemRecordProvisioning :one
-- Records a provisioned branch and pull request, only for the lease
-- generation that asked for it: a stale lease's result is discarded. The
-- item's row is share-locked so a concurrent recovery cannot slip between
-- the check and the write.
INSERT INTO github_items (entry_id, branch, head_sha, pr_number, pr_url, provisioned_generation)
SELECT w.id, @branch::text, @head_sha::text, @pr_number::integer, @pr_url::text, w.lease_generation
FROM work_items w
WHERE w.id = @entry_id AND w.status = 'assigned' AND w.lease_generation = @lease_generation
FOR SHARE OF w
ON CONFLICT (entry_id) DO UPDATE
SET branch = EXCLUDED.branch, head_sha = EXCLUDED.head_sha, pr_number = EXCLUDED.pr_number,
    pr_url = EXCLUDED.pr_url, provisioned_generation = EXCLUDED.provisioned_generation
RETURNING *;
