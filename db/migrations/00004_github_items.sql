-- +goose Up
-- What GitHub holds for a work item moves out of work_items into a table
-- the GitHub side (app/github) owns, so queue.Store stays the only writer
-- of work_items. The old columns are left in place, unused (migrations are
-- additive), and their data is copied here.
CREATE TABLE IF NOT EXISTS github_items (
    entry_id               uuid PRIMARY KEY REFERENCES work_items (id),
    -- The commit an issue item's check run sits on: its provisioned branch head.
    head_sha               text,
    check_run_id           bigint,
    branch                 text,
    pr_number              integer,
    pr_url                 text,
    -- The lease generation whose provisioning was recorded.
    provisioned_generation bigint
);

INSERT INTO github_items (entry_id, head_sha, check_run_id, branch, pr_number, pr_url, provisioned_generation)
SELECT id, head_sha, check_run_id, branch, pr_number, pr_url, provisioned_generation
FROM work_items
WHERE head_sha IS NOT NULL OR check_run_id IS NOT NULL OR branch IS NOT NULL
ON CONFLICT (entry_id) DO NOTHING;

-- +goose Down
