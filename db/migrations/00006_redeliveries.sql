-- +goose Up
-- The redelivery reconciler's state (SPEC §6.1), owned by app/github.

-- One row: how far back the delivery log has been scanned. high_water is the
-- newest delivered_at a completed scan saw; the next scan pages back to it,
-- less a few minutes' overlap.
CREATE TABLE redelivery_scans (
    id          smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    high_water  timestamptz NOT NULL,
    scanned_at  timestamptz NOT NULL
);

-- One row per delivery guid the reconciler acted on or chose not to act on:
-- requested (requests > 0), skipped as rejected by gitlease (400, 401, 409,
-- 413), refused by GitHub (422) or given up on after three requests.
CREATE TABLE redeliveries (
    guid             text PRIMARY KEY,
    event            text NOT NULL,
    action           text,
    installation_id  bigint,
    repository_id    bigint,
    -- Redelivery requests sent for this guid; never more than three.
    requests         integer NOT NULL DEFAULT 0 CHECK (requests BETWEEN 0 AND 3),
    -- The newest attempt the log showed when this row last changed: a
    -- request is made again only for a newer failed attempt.
    last_attempt_id  bigint NOT NULL,
    -- The status code of that attempt (0: no HTTP answer).
    last_status_code integer NOT NULL,
    result           text NOT NULL CHECK (result IN
                       ('requesting', 'requested', 'request_failed', 'github_refused', 'rejected_skipped', 'unrecoverable')),
    -- What GitHub answered the last request, or why it failed.
    detail           text,
    first_seen_at    timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    CONSTRAINT redeliveries_requested_counts CHECK (result IN ('rejected_skipped', 'unrecoverable') OR requests > 0)
);

CREATE INDEX redeliveries_updated_at ON redeliveries (updated_at);

-- +goose Down
