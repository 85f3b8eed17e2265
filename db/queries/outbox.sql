-- name: OutboxInsert :exec
INSERT INTO outbox (lane, kind, entry_id, payload, created_at, available_at, trace_parent)
VALUES (@lane, @kind, sqlc.narg('entry_id'), @payload, @now::timestamptz, @now::timestamptz, sqlc.narg('trace_parent'));

-- name: OutboxInsertMany :exec
-- OutboxInsert of several rows in one statement: the queued check runs of
-- a group of new items (queue.GroupObserver).
INSERT INTO outbox (lane, kind, entry_id, payload, created_at, available_at, trace_parent)
SELECT (@lanes::text[])[i], (@kinds::text[])[i], (@entry_ids::uuid[])[i], (@payloads::jsonb[])[i],
    @now::timestamptz, @now::timestamptz, NULLIF((@trace_parents::text[])[i], '')
FROM generate_subscripts(@lanes::text[], 1) AS i;

-- name: OutboxClaimBatch :many
-- Claims due rows that are first in their lane. SKIP LOCKED keeps senders
-- in other processes off the same rows; the claim (locked_until) keeps them
-- off while this sender talks to GitHub without holding a transaction open.
-- A check-run row waits until its item has a commit to sit on: a pull
-- request's head (in its dispatch) or an issue item's provisioned branch;
-- once the item has finished it waits no longer (the sender then records
-- why it cannot be written, rather than keep it pending for ever).
UPDATE outbox o
SET locked_until = @lock_until::timestamptz, attempts = o.attempts + 1
WHERE o.id IN (
    SELECT c.id FROM outbox c
    WHERE c.status = 'pending' AND c.available_at <= @now::timestamptz
      AND (c.locked_until IS NULL OR c.locked_until < @now::timestamptz)
      AND NOT EXISTS (
          SELECT 1 FROM outbox p WHERE p.lane = c.lane AND p.status = 'pending' AND p.id < c.id)
      AND (c.kind <> 'check_run' OR EXISTS (
          SELECT 1 FROM work_items w LEFT JOIN github_items g ON g.entry_id = w.id
          WHERE w.id = c.entry_id
            AND (g.head_sha IS NOT NULL OR w.dispatch #>> '{subject,metadata,head_sha}' IS NOT NULL
                 OR w.finished_at IS NOT NULL)))
    ORDER BY c.available_at, c.id
    LIMIT @batch
    FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: OutboxDone :exec
-- Only a pending row: one stopped meanwhile (its installation went away)
-- stays failed.
UPDATE outbox SET status = 'done', finished_at = @now::timestamptz, locked_until = NULL, last_error = NULL,
    last_answer = sqlc.narg('last_answer')
WHERE id = @id AND status = 'pending';

-- name: OutboxRetry :exec
UPDATE outbox SET available_at = @available_at::timestamptz, locked_until = NULL, last_error = @last_error,
    last_answer = sqlc.narg('last_answer')
WHERE id = @id;

-- name: OutboxRetryAfterProgress :exec
-- Gives a row back after some of its steps got through: its backoff starts
-- over from this attempt.
UPDATE outbox SET available_at = @available_at::timestamptz, locked_until = NULL, last_error = @last_error,
    last_answer = sqlc.narg('last_answer'), progress_attempts = attempts
WHERE id = @id;

-- name: OutboxFail :exec
UPDATE outbox SET status = 'failed', finished_at = @now::timestamptz, locked_until = NULL, last_error = @last_error,
    last_answer = sqlc.narg('last_answer')
WHERE id = @id;

-- name: OutboxBacklog :one
-- Each count reads only its partial index (outbox_due, outbox_failed), never
-- the done rows, so a scrape costs the backlog, not the table's history.
SELECT (SELECT count(*) FROM outbox WHERE status = 'pending')::bigint AS pending,
       (SELECT count(*) FROM outbox WHERE status = 'failed')::bigint AS failed;

-- name: OutboxPruneDone :execrows
-- Deletes up to @batch rows sent (done) before @before, oldest first, over
-- the partial index outbox_done_finished. Failed rows are kept: an operator
-- retries or reads them.
DELETE FROM outbox
WHERE id IN (
    SELECT id FROM outbox
    WHERE status = 'done' AND finished_at < @before::timestamptz
    ORDER BY finished_at
    LIMIT @batch
);

-- name: OutboxRetryFailed :one
-- An operator sends a failed write again: it becomes pending and due now,
-- keeping its attempts and GitHub's last answer until the next one.
UPDATE outbox
SET status = 'pending', finished_at = NULL, available_at = @now::timestamptz, locked_until = NULL
WHERE id = @id AND status = 'failed'
RETURNING *;

-- name: OutboxNextRetry :one
-- When the earliest row given back for later becomes due (NULL: none), so
-- an idle sender wakes for it rather than at its next poll.
SELECT min(available_at)::timestamptz FROM outbox WHERE status = 'pending' AND available_at > @now::timestamptz;

-- name: OutboxFailInstallation :execrows
-- Stops the pending rows of an installation deleted or suspended (or of
-- repositories removed from it, when repository_ids is not empty): they
-- are marked failed with the reason instead of being sent. Items' rows are
-- found through their dispatch, standalone check runs through their payload.
-- Their last answer says why they were not sent, not an older attempt's.
UPDATE outbox o
SET status = 'failed', finished_at = @now::timestamptz, locked_until = NULL, last_error = @reason::text,
    last_answer = 'not sent: ' || @reason::text
WHERE o.status = 'pending' AND (
    EXISTS (SELECT 1 FROM work_items w
            WHERE w.id = o.entry_id
              AND w.dispatch #>> '{subject,metadata,installation_id}' = @installation_id::text
              AND (cardinality(@repository_ids::text[]) = 0
                   OR w.dispatch #>> '{subject,metadata,repository_id}' = ANY (sqlc.arg('repository_ids')::text[])))
    OR (o.entry_id IS NULL AND o.payload ->> 'installation_id' = @installation_id::text
        AND (cardinality(sqlc.arg('repository_names')::text[]) = 0 OR lower(o.payload ->> 'repository') = ANY (sqlc.arg('repository_names')::text[]))));

-- name: OutboxLanePending :one
-- Whether a lane still has writes to send: a check run's progress waits
-- for its state changes.
SELECT EXISTS (SELECT 1 FROM outbox WHERE lane = @lane AND status = 'pending');
