-- name: RedeliveryTryLock :one
-- Takes the reconciler's session advisory lock, so one scan runs at a time
-- across every serve instance; false when another session holds it.
SELECT pg_try_advisory_lock(@key::bigint) AS locked;

-- name: RedeliveryUnlock :one
SELECT pg_advisory_unlock(@key::bigint) AS unlocked;

-- name: RedeliveryScanGet :one
SELECT * FROM redelivery_scans WHERE id = 1;

-- name: RedeliveryScanAdvance :exec
-- Moves the high-water mark forward, never back.
INSERT INTO redelivery_scans (id, high_water, scanned_at) VALUES (1, @high_water::timestamptz, @now::timestamptz)
ON CONFLICT (id) DO UPDATE
SET high_water = GREATEST(redelivery_scans.high_water, EXCLUDED.high_water), scanned_at = EXCLUDED.scanned_at;

-- name: RedeliveryRecorded :many
-- Returns the guids among @guids that gitlease's deliveries table holds:
-- deliveries gitlease committed, whatever GitHub recorded as their answer.
SELECT delivery_id FROM deliveries WHERE delivery_id = ANY(@guids::text[]);

-- name: RedeliveryGetMany :many
SELECT * FROM redeliveries WHERE guid = ANY(@guids::text[]);

-- name: RedeliveryClaim :one
-- Claims the next redelivery request for a guid whose newest attempt is
-- @attempt_id, as a compare-and-swap: it counts a request only when fewer
-- than three were made and none was made yet, or the last one was made for
-- an older attempt (the redelivery itself failed), failed to reach GitHub,
-- was skipped as rejected (an operator's --include-rejected), or was
-- claimed before @stale_before by a scan that never recorded GitHub's
-- answer (its process died); never after GitHub refused it (422) or it was
-- given up on. No row means another scan claimed it first, or it may not be
-- requested.
INSERT INTO redeliveries (guid, event, action, installation_id, repository_id, requests,
                          last_attempt_id, last_status_code, result, first_seen_at, updated_at)
VALUES (@guid, @event, sqlc.narg('action'), sqlc.narg('installation_id'), sqlc.narg('repository_id'), 1,
        @attempt_id, @status_code, 'requesting', @now::timestamptz, @now::timestamptz)
ON CONFLICT (guid) DO UPDATE
SET requests = redeliveries.requests + 1, last_attempt_id = GREATEST(redeliveries.last_attempt_id, EXCLUDED.last_attempt_id),
    last_status_code = EXCLUDED.last_status_code, result = 'requesting', detail = NULL, updated_at = EXCLUDED.updated_at
WHERE redeliveries.requests < 3
  AND redeliveries.result NOT IN ('github_refused', 'unrecoverable')
  AND CASE WHEN redeliveries.result = 'requesting' THEN redeliveries.updated_at < @stale_before::timestamptz
           ELSE redeliveries.requests = 0 OR redeliveries.result IN ('request_failed', 'rejected_skipped')
                OR redeliveries.last_attempt_id < EXCLUDED.last_attempt_id END
RETURNING *;

-- name: RedeliverySetResult :exec
-- Records what GitHub answered the request claimed by RedeliveryClaim.
UPDATE redeliveries SET result = @result, detail = sqlc.narg('detail'), updated_at = @now::timestamptz
WHERE guid = @guid AND result = 'requesting';

-- name: RedeliveryMark :one
-- Records a guid the reconciler will not request (rejected_skipped) or no
-- longer requests (unrecoverable), once: a row is returned only when this
-- call changed the result, so the metric counts each guid once.
INSERT INTO redeliveries (guid, event, action, installation_id, repository_id, requests,
                          last_attempt_id, last_status_code, result, first_seen_at, updated_at)
VALUES (@guid, @event, sqlc.narg('action'), sqlc.narg('installation_id'), sqlc.narg('repository_id'), 0,
        @attempt_id, @status_code, @result, @now::timestamptz, @now::timestamptz)
ON CONFLICT (guid) DO UPDATE
SET result = EXCLUDED.result, last_attempt_id = GREATEST(redeliveries.last_attempt_id, EXCLUDED.last_attempt_id),
    last_status_code = EXCLUDED.last_status_code, updated_at = EXCLUDED.updated_at
WHERE redeliveries.result <> EXCLUDED.result AND redeliveries.result NOT IN ('unrecoverable', 'github_refused', 'requesting')
RETURNING *;

-- name: RedeliveryList :many
-- The reconciler's rows changed since @since, newest first, for operators.
SELECT * FROM redeliveries WHERE updated_at >= @since::timestamptz ORDER BY updated_at DESC, guid LIMIT @max;

-- name: RedeliverySummary :one
-- What the dashboard's overview shows of the reconciler: its last scan
-- (the epoch before the first) and the guids it found missed, redelivered
-- and could not recover. Rejected-as-bad-input guids are not missed ones.
SELECT coalesce((SELECT s.scanned_at FROM redelivery_scans s WHERE s.id = 1), 'epoch'::timestamptz)::timestamptz AS last_scan,
       count(*) FILTER (WHERE r.result <> 'rejected_skipped') AS missed,
       count(*) FILTER (WHERE r.result = 'requested') AS redelivered,
       count(*) FILTER (WHERE r.result IN ('unrecoverable', 'github_refused')) AS unrecoverable
FROM redeliveries r;
