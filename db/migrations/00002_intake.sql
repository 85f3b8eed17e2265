-- +goose Up
-- Every verified webhook delivery, recorded in the transaction that acts on it.
CREATE TABLE deliveries (
    delivery_id      text PRIMARY KEY,
    event            text NOT NULL,
    action           text,
    installation_id  bigint,
    repository_id    bigint,
    repository       text,
    sender           text,
    -- Index of the configured webhook secret that verified the signature.
    secret_index     integer NOT NULL CHECK (secret_index >= 0),
    body_sha256      text NOT NULL,
    received_at      timestamptz NOT NULL,
    last_received_at timestamptz NOT NULL,
    -- GitHub redelivers with the same delivery ID; each arrival counts.
    attempts         integer NOT NULL DEFAULT 1 CHECK (attempts >= 1),
    -- 'received' only inside the recording transaction.
    outcome          text NOT NULL CHECK (outcome IN
                       ('received', 'enqueued', 'subject_collision', 'reservation_collision', 'cancelled', 'ignored')),
    reason           text,
    entry_id         uuid,
    qualified_id     text,
    generation       bigint
);

CREATE INDEX deliveries_received_at ON deliveries (received_at);

-- A close event asks an assigned item to stop; its next renew tells it.
ALTER TABLE work_items ADD COLUMN cancel_requested_at timestamptz;

-- +goose Down
