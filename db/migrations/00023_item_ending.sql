-- +goose Up
-- How an item ended, in one line, for its check run's summary (SPEC §8.3):
-- who cancelled it and how ("Cancelled by @octo with the Cancel button"),
-- or what its command did ("Command exited 3"); and the command's exit
-- status, when a built-in worker ran one. Both are NULL for the items
-- before this migration and for what outside workers complete.
ALTER TABLE work_items ADD COLUMN IF NOT EXISTS end_reason text;
ALTER TABLE work_items ADD COLUMN IF NOT EXISTS exit_code integer;

-- +goose Down
-- Migrations are additive; there is no down.
