-- +goose Up
-- How an item ended, in one line, for its check run's summary (SPEC §8.3):
-- who cancelled it and how ("Cancelled by @octo with the Cancel button"),
-- or what its command did ("Command exited 3"); and the command's exit
-- status, when a built-in worker ran one. A table beside work_items rather
-- than columns of it: the queue's hot statements, which read and return
-- whole work_items rows, stay as they are, and only a cancel or a
-- completion that says how it ended writes here. A row is written when a
-- cancel is asked for (an assigned item keeps the reason until its owner
-- stops) or when a worker completes with a reason.
CREATE TABLE IF NOT EXISTS work_item_endings (
    entry_id   uuid PRIMARY KEY REFERENCES work_items (id) ON DELETE CASCADE,
    end_reason text,
    exit_code  integer
);

-- +goose Down
-- Migrations are additive; there is no down.
