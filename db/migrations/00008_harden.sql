-- +goose Up
-- Where a work item came from: 'github' only for items the webhook intake
-- created from a verified delivery, 'rpc' for every other (queue API over
-- HTTP or stdio). GitHub side effects (check runs, branches, pull requests,
-- the worker's installation token) happen only for 'github' items, whatever
-- an item's dispatch claims (SPEC §7). Existing rows keep the default
-- 'rpc' unless a delivery record names them: those came from the intake.
ALTER TABLE work_items ADD COLUMN IF NOT EXISTS source text NOT NULL DEFAULT 'rpc';

-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE work_items ADD CONSTRAINT work_items_source_check CHECK (source IN ('rpc', 'github'));
EXCEPTION WHEN duplicate_object THEN
    NULL;
END $$;
-- +goose StatementEnd

UPDATE work_items w SET source = 'github'
FROM deliveries d
WHERE d.entry_id = w.id AND d.outcome = 'enqueued' AND w.source <> 'github';

-- The outbox's failed rows and its done rows by age, each over a partial
-- index: /metrics counts the failed ones at every scrape, and the pruner
-- deletes done rows past their retention, without scanning the table.
CREATE INDEX IF NOT EXISTS outbox_failed ON outbox (id) WHERE status = 'failed';
CREATE INDEX IF NOT EXISTS outbox_done_finished ON outbox (finished_at) WHERE status = 'done';

-- +goose Down
DROP INDEX IF EXISTS outbox_done_finished;
DROP INDEX IF EXISTS outbox_failed;
ALTER TABLE work_items DROP CONSTRAINT IF EXISTS work_items_source_check;
ALTER TABLE work_items DROP COLUMN IF EXISTS source;
