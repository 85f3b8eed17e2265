-- name: DeliveryRecord :one
-- Records an arrival of a delivery. A first arrival inserts the row, with
-- its outcome when the intake already acted ('received' when it acts
-- next); a redelivery (same ID) counts an attempt and waits for the first
-- arrival's transaction, so it reads that arrival's final outcome.
INSERT INTO deliveries (
    delivery_id, event, action, installation_id, repository_id, repository, sender,
    secret_index, body_sha256, received_at, last_received_at,
    outcome, reason, entry_id, qualified_id, generation
) VALUES (
    @delivery_id, @event, sqlc.narg('action'), sqlc.narg('installation_id'), sqlc.narg('repository_id'),
    sqlc.narg('repository'), sqlc.narg('sender'), @secret_index, @body_sha256, @now::timestamptz, @now::timestamptz,
    @outcome, sqlc.narg('reason'), sqlc.narg('entry_id'), sqlc.narg('qualified_id'), sqlc.narg('generation')
)
ON CONFLICT (delivery_id) DO UPDATE
    SET attempts = deliveries.attempts + 1, last_received_at = EXCLUDED.last_received_at
RETURNING *, (xmax = 0) AS inserted;

-- name: DeliveryInsertFirst :exec
-- DeliveryRecord for the intake's fast path, sent with the transaction's
-- COMMIT (queue.AtCommit): a first arrival inserts its row with its outcome;
-- a redelivery violates the primary key, which rolls the transaction back
-- and sends the intake down its full path (DeliveryRecord first).
INSERT INTO deliveries (
    delivery_id, event, action, installation_id, repository_id, repository, sender,
    secret_index, body_sha256, received_at, last_received_at,
    outcome, reason, entry_id, qualified_id, generation
) VALUES (
    @delivery_id, @event, sqlc.narg('action'), sqlc.narg('installation_id'), sqlc.narg('repository_id'),
    sqlc.narg('repository'), sqlc.narg('sender'), @secret_index, @body_sha256, @now::timestamptz, @now::timestamptz,
    @outcome, sqlc.narg('reason'), sqlc.narg('entry_id'), sqlc.narg('qualified_id'), sqlc.narg('generation')
);

-- name: DeliveryInsertFirsts :exec
-- DeliveryInsertFirst for a group of first arrivals that each enqueued an
-- item (the intake's group commit), in one statement sent with the COMMIT.
-- An empty action, repository or sender and a zero installation or
-- repository ID are none.
INSERT INTO deliveries (
    delivery_id, event, action, installation_id, repository_id, repository, sender,
    secret_index, body_sha256, received_at, last_received_at,
    outcome, entry_id, qualified_id, generation
)
SELECT (@delivery_ids::text[])[i], (@events::text[])[i], NULLIF((@actions::text[])[i], ''),
    NULLIF((@installation_ids::bigint[])[i], 0), NULLIF((@repository_ids::bigint[])[i], 0),
    NULLIF((@repositories::text[])[i], ''), NULLIF((@senders::text[])[i], ''),
    (@secret_indexes::int[])[i], (@body_sha256s::text[])[i], @now::timestamptz, @now::timestamptz,
    'enqueued', (@entry_ids::uuid[])[i], (@qualified_ids::text[])[i], (@generations::bigint[])[i]
FROM generate_subscripts(@delivery_ids::text[], 1) AS i;

-- name: DeliverySetOutcome :exec
UPDATE deliveries
SET outcome = @outcome, reason = sqlc.narg('reason'), entry_id = sqlc.narg('entry_id'),
    qualified_id = sqlc.narg('qualified_id'), generation = sqlc.narg('generation')
WHERE delivery_id = @delivery_id;

-- name: DeliveryPrune :execrows
-- Deletes deliveries older than the retention age, a bounded batch at a time.
DELETE FROM deliveries
WHERE delivery_id IN (
    SELECT delivery_id FROM deliveries WHERE received_at < @before::timestamptz LIMIT @batch
);
