-- +goose Up
-- Indexes the operator dashboard (app/ui) reads through, so its pages stay
-- cheap on a table of millions of items: newest-first keyset pages of items
-- (all, of one status or of one repository), the deliveries and GitHub writes of one item, and
-- the open (pending or failed) GitHub writes.
CREATE INDEX work_items_newest ON work_items (enqueued_at DESC, id DESC);
CREATE INDEX work_items_status_newest ON work_items (status, enqueued_at DESC, id DESC);
CREATE INDEX work_items_repository_newest
    ON work_items (lower(dispatch #>> '{subject,metadata,repository}'), enqueued_at DESC, id DESC);
CREATE INDEX deliveries_entry ON deliveries (entry_id) WHERE entry_id IS NOT NULL;
CREATE INDEX outbox_entry ON outbox (entry_id, id) WHERE entry_id IS NOT NULL;
CREATE INDEX outbox_open ON outbox (status, id) WHERE status <> 'done';

-- +goose Down
DROP INDEX outbox_open;
DROP INDEX outbox_entry;
DROP INDEX deliveries_entry;
DROP INDEX work_items_repository_newest;
DROP INDEX work_items_status_newest;
DROP INDEX work_items_newest;
