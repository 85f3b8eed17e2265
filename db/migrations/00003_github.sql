-- +goose Up
-- What GitHub knows about an item: the commit its check run sits on, its check run, and (issue items) the branch and pull request
-- provisioned for it, recorded only for the lease generation that asked.
ALTER TABLE work_items
    ADD COLUMN head_sha text,
    ADD COLUMN check_run_id bigint,
    ADD COLUMN branch text,
    ADD COLUMN pr_number integer,
    ADD COLUMN pr_url text,
    ADD COLUMN provisioned_generation bigint,
    -- What the worker said when it finished (the tail of its output).
    ADD COLUMN result_note text;


-- The GitHub outbox: every GitHub write, committed with the queue change
-- that causes it, drained by senders in any number of processes. Rows of one
-- lane run strictly in id order (check-run updates must not overtake their
-- create); lanes run independently.
CREATE TABLE outbox (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lane          text NOT NULL,
    kind          text NOT NULL,
    entry_id      uuid,
    payload       jsonb NOT NULL,
    created_at    timestamptz NOT NULL,
    available_at  timestamptz NOT NULL,
    -- A sender's claim; a claim that outlives its sender simply expires.
    locked_until  timestamptz,
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text,
    status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed')),
    finished_at   timestamptz,
    CONSTRAINT outbox_finished_iff_final CHECK ((status = 'pending') = (finished_at IS NULL))
);

CREATE INDEX outbox_due ON outbox (available_at, id) WHERE status = 'pending';
CREATE INDEX outbox_lane ON outbox (lane, id) WHERE status = 'pending';

-- +goose Down
