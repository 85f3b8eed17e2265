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

-- name: GitHubItemRecordStartCommit :exec
-- Records the initial commit created for an item's branch before the
-- branch exists, so a retry creates the branch on it rather than another.
INSERT INTO github_items (entry_id, start_commit_sha) VALUES (@entry_id, @sha::text)
ON CONFLICT (entry_id) DO UPDATE SET start_commit_sha = EXCLUDED.start_commit_sha;

-- name: GitHubItemRecordBranchSHA :exec
-- Records that an item's branch exists at sha, before its pull request does.
INSERT INTO github_items (entry_id, branch_sha) VALUES (@entry_id, @sha::text)
ON CONFLICT (entry_id) DO UPDATE SET branch_sha = EXCLUDED.branch_sha;

-- name: GitHubItemSetCheckOutput :exec
-- Records the title and summary the item's check run shows now.
INSERT INTO github_items (entry_id, check_title, check_summary) VALUES (@entry_id, @title::text, @summary::text)
ON CONFLICT (entry_id) DO UPDATE SET check_title = EXCLUDED.check_title, check_summary = EXCLUDED.check_summary;

-- name: GitHubItemEntryOnCommit :one
-- The newest item of a repository whose check run sits on a commit (an
-- issue item's branch head, a pull request's head): the entry of this
-- App's check suite there.
SELECT w.id FROM work_items w JOIN github_items g ON g.entry_id = w.id
WHERE g.check_run_id IS NOT NULL
  AND w.dispatch #>> '{subject,metadata,repository_id}' = @repository_id::text
  AND (g.head_sha = @head_sha::text OR w.dispatch #>> '{subject,metadata,head_sha}' = @head_sha::text)
ORDER BY w.enqueued_at DESC, w.id
LIMIT 1;
