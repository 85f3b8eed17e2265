-- +goose Up
-- The contract step of moving GitHub's state out of work_items: since
-- migration 00004 it lives in github_items (app/outbox), and no query of
-- this release names these columns, so an instance of this release runs on
-- either side of this migration (docs/operations.md, "Dropping a column").
-- DROP COLUMN only marks the columns dropped: nothing is rewritten, and the
-- table's lock is held for as long as the catalog update takes. IF EXISTS
-- makes a re-run after an interrupted one a no-op.
ALTER TABLE work_items
    DROP COLUMN IF EXISTS head_sha,
    DROP COLUMN IF EXISTS check_run_id,
    DROP COLUMN IF EXISTS branch,
    DROP COLUMN IF EXISTS pr_number,
    DROP COLUMN IF EXISTS pr_url,
    DROP COLUMN IF EXISTS provisioned_generation;

-- +goose Down
-- There is no down: the values live on in github_items.
