-- name: SubjectGenerationNext :one
-- Takes the next generation of a subject. The upsert row-locks the subject
-- until the transaction ends, so a rolled-back enqueue leaves no gap.
INSERT INTO subject_generations (qualified_id, last_generation)
VALUES (@qualified_id, 1)
ON CONFLICT (qualified_id) DO UPDATE
    SET last_generation = subject_generations.last_generation + 1
RETURNING last_generation;

-- name: WorkItemSweepExpired :many
-- Drops pending entries whose run_at + expire_after_secs has passed, a
-- bounded batch per call. The ORDER BY and LIMIT keep the plan on the
-- expiry index whatever the statistics say, so the sweep on every enqueue
-- and lease costs one index probe when nothing has expired.
UPDATE work_items
SET status = 'dropped', finished_at = @now::timestamptz
WHERE id IN (
    SELECT id FROM work_items
    WHERE status = 'pending' AND expires_after IS NOT NULL AND expires_after < @now::timestamptz
    ORDER BY expires_after
    LIMIT 100
    FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: WorkItemGet :one
SELECT * FROM work_items WHERE id = @id;

-- name: WorkItemLiveBySubject :one
-- The entry that blocks a new generation of canonical_id: a live v2 entry
-- (highest generation first), else a pending or held legacy one.
SELECT * FROM work_items
-- The two arms of the OR are the two partial indexes on canonical_id:
-- work_items_live_subject (v2) and work_items_live_legacy.
WHERE canonical_id = @canonical_id::text
  AND status IN ('pending', 'assigned', 'held')
  AND ((subject_generation IS NOT NULL) OR (subject_generation IS NULL AND status IN ('pending', 'held')))
ORDER BY subject_generation DESC NULLS LAST, position
LIMIT 1;

-- name: WorkItemInsert :one
INSERT INTO work_items (
    id, status, is_v2, subject_id, canonical_id, subject_generation, task_id,
    dispatch, enqueued_at, run_at, run_at_time, expire_after_secs, expires_after,
    idempotency_key, request_hash, repository, base_ref, head_ref
) VALUES (
    @id, 'pending', @is_v2, @subject_id, sqlc.narg('canonical_id'), sqlc.narg('subject_generation'),
    sqlc.narg('task_id'), @dispatch, @enqueued_at, sqlc.narg('run_at'), sqlc.narg('run_at_time'),
    sqlc.narg('expire_after_secs'), sqlc.narg('expires_after'), sqlc.narg('idempotency_key'),
    sqlc.narg('request_hash'), sqlc.narg('repository'), sqlc.narg('base_ref'), sqlc.narg('head_ref')
)
RETURNING *;

-- name: WorkItemGrantIdentity :one
-- Gives a legacy entry v2 identity when the v2 lease reaches it.
UPDATE work_items SET subject_generation = @subject_generation, subject_id = canonical_id
WHERE id = @id AND subject_generation IS NULL
RETURNING *;

-- name: WorkItemLeaseGenericPlans :exec
-- Makes the rest of the lease's transaction run generic plans. The generic
-- plan of WorkItemLeaseMany (a primary-key probe per id) is the plan the
-- custom plans find too, but on a large table (1,000,000 rows) the plan
-- cache prices it above them and plans the statement again on every call:
-- 0.6 ms of planning for a 1.3 ms statement (docs/BENCHMARKS.md).
SELECT set_config('plan_cache_mode', 'force_generic_plan', true);

-- name: WorkItemLeaseMany :many
-- Hands out the locked candidates: one lease generation up, a new expiry.
-- Their installations (@installation_ids, in turn order) are marked served
-- now, later turns later; one another lease is marking (its row lock) is
-- left to it, so concurrent leases never wait here.
WITH served AS (
    UPDATE lease_installations l SET served = s.ticket * 8 + u.turn
    FROM (SELECT nextval('lease_installations_served') AS ticket) s,
         unnest(@installation_ids::bigint[]) WITH ORDINALITY AS u(installation_id, turn)
    WHERE l.installation_id = u.installation_id
      AND l.installation_id IN (
          SELECT installation_id FROM lease_installations
          WHERE installation_id = ANY (@installation_ids::bigint[])
          FOR UPDATE SKIP LOCKED)
)
UPDATE work_items w
SET status = 'assigned',
    workflow_id = u.workflow_id,
    workflow_generation = COALESCE(w.workflow_generation, 1),
    lease_owner = @owner_id::text,
    lease_generation = w.lease_generation + 1,
    lease_expires_at = @expires_at::timestamptz,
    assigned_at = @now::timestamptz,
    held_at = NULL
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@workflow_ids::text[]) AS workflow_id) AS u
WHERE w.id = u.id AND w.status = 'pending'
RETURNING w.*;

-- name: WorkItemRenew :one
UPDATE work_items w
SET lease_expires_at = GREATEST(w.lease_expires_at, @new_expires_at::timestamptz)
WHERE w.id = @id AND w.status = 'assigned' AND w.lease_expires_at > @now::timestamptz
  AND w.cancel_requested_at IS NULL
  AND work_item_fence_matches(w, @workflow_id, @workflow_generation, @qualified_id,
        @subject_generation, @owner_id, @lease_generation,
        sqlc.narg('repository'), sqlc.narg('base_ref'), sqlc.narg('head_ref'))
RETURNING *;

-- name: WorkItemRecover :one
UPDATE work_items w
SET lease_owner = @new_owner_id::text,
    lease_generation = w.lease_generation + 1,
    lease_expires_at = @new_expires_at::timestamptz
WHERE w.id = @id AND w.status = 'assigned' AND w.lease_expires_at <= @now::timestamptz
  AND work_item_fence_matches(w, @workflow_id, @workflow_generation, @qualified_id,
        @subject_generation, @owner_id, @lease_generation,
        sqlc.narg('repository'), sqlc.narg('base_ref'), sqlc.narg('head_ref'))
RETURNING *;

-- name: WorkItemComplete :one
UPDATE work_items w
SET status = @status::text, finished_at = @now::timestamptz, result_note = sqlc.narg('note')
WHERE w.id = @id AND w.status = 'assigned'
  AND work_item_fence_matches(w, @workflow_id, @workflow_generation, @qualified_id,
        @subject_generation, @owner_id, @lease_generation,
        sqlc.narg('repository'), sqlc.narg('base_ref'), sqlc.narg('head_ref'))
RETURNING *;

-- name: WorkItemReleasePending :one
UPDATE work_items w
SET status = 'pending', assigned_at = NULL
WHERE w.id = @id AND w.status = 'assigned'
  AND work_item_fence_matches(w, @workflow_id, @workflow_generation, @qualified_id,
        @subject_generation, @owner_id, @lease_generation,
        sqlc.narg('repository'), sqlc.narg('base_ref'), sqlc.narg('head_ref'))
RETURNING *;

-- name: WorkItemList :many
SELECT * FROM work_items
WHERE status IN ('pending', 'assigned', 'held')
  AND (cardinality(@statuses::text[]) = 0 OR status = ANY(@statuses::text[]))
ORDER BY position
LIMIT @lim OFFSET @off;

-- name: WorkItemCount :one
SELECT count(*) FROM work_items
WHERE status IN ('pending', 'assigned', 'held')
  AND (cardinality(@statuses::text[]) = 0 OR status = ANY(@statuses::text[]));

-- name: WorkItemStats :one
SELECT count(*) AS total,
       count(*) FILTER (WHERE status = 'pending') AS pending,
       count(*) FILTER (WHERE status = 'assigned') AS assigned,
       count(*) FILTER (WHERE status = 'held') AS held,
       count(*) FILTER (WHERE status = 'pending' AND run_at_time > @now::timestamptz) AS deferred
FROM work_items
WHERE status IN ('pending', 'assigned', 'held');

-- name: WorkItemHold :one
UPDATE work_items SET status = 'held', held_at = @now::timestamptz
WHERE id = @id AND status = 'pending'
RETURNING *;

-- name: WorkItemRelease :one
UPDATE work_items SET status = 'pending', held_at = NULL
WHERE id = @id AND status = 'held'
RETURNING *;

-- name: WorkItemDrop :one
UPDATE work_items SET status = 'dropped', finished_at = @now::timestamptz
WHERE id = @id AND status IN ('pending', 'assigned', 'held')
RETURNING *;

-- name: WorkItemFirstDueV2 :one
SELECT * FROM work_items
WHERE status = 'pending' AND is_v2 AND (run_at_time IS NULL OR run_at_time <= @now::timestamptz)
ORDER BY position
LIMIT 1;

-- name: WorkItemCountLiveBySubjectID :one
SELECT count(*) FROM work_items
WHERE subject_id = @subject_id::text AND status IN ('pending', 'assigned', 'held');

-- name: WorkItemLegacyLeaseCandidates :many
-- Legacy lease: due pending legacy entries, and legacy assigned ones whose lease expired.
SELECT * FROM work_items
WHERE NOT is_v2 AND subject_generation IS NULL
  AND ((status = 'pending' AND (run_at_time IS NULL OR run_at_time <= @now::timestamptz))
       OR (status = 'assigned' AND lease_expires_at <= @now::timestamptz))
ORDER BY position
LIMIT @scan
FOR UPDATE SKIP LOCKED;

-- name: WorkItemLegacyAssign :one
UPDATE work_items
SET status = 'assigned', workflow_id = @workflow_id::text, assigned_at = @now::timestamptz,
    lease_expires_at = sqlc.narg('lease_expires_at'), held_at = NULL
WHERE id = @id
RETURNING *;

-- name: WorkItemLegacyReleasePending :one
UPDATE work_items
SET status = 'pending', workflow_id = NULL, assigned_at = NULL, lease_expires_at = NULL
WHERE id = @id AND status = 'assigned' AND NOT is_v2 AND subject_generation IS NULL
RETURNING *;

-- name: WorkItemLegacyComplete :one
UPDATE work_items SET status = @status::text, finished_at = @now::timestamptz
WHERE id = @id AND status = 'assigned'
RETURNING *;

-- name: WorkItemLivePositions :many
SELECT id, position FROM work_items
WHERE status IN ('pending', 'assigned', 'held')
ORDER BY position
FOR UPDATE;

-- name: WorkItemSetPosition :exec
UPDATE work_items SET position = @position WHERE id = @id;

-- name: WorkItemNextDeadline :one
SELECT run_at_time FROM work_items
WHERE status = 'pending' AND run_at_time > @now::timestamptz
ORDER BY run_at_time
LIMIT 1;

-- name: WorkItemGetForUpdate :one
SELECT * FROM work_items WHERE id = @id FOR UPDATE;

-- name: WorkItemCancelSubject :many
-- A closed subject: its pending and held items finish cancelled.
UPDATE work_items
SET status = 'cancelled', finished_at = @now::timestamptz
-- Each arm of the OR is served by one partial index on canonical_id.
WHERE canonical_id = @canonical_id::text AND status IN ('pending', 'held')
  AND (subject_generation IS NOT NULL OR subject_generation IS NULL)
RETURNING *;

-- name: WorkItemRequestCancel :many
-- A closed subject: its assigned items are told to stop at their next renew.
UPDATE work_items
SET cancel_requested_at = @now::timestamptz
WHERE canonical_id = @canonical_id::text AND status = 'assigned' AND cancel_requested_at IS NULL
  AND (subject_generation IS NOT NULL OR subject_generation IS NULL)
RETURNING *;

-- name: WorkItemFinishCancelled :one
-- Ends an assigned item whose subject was closed, at its owner's renew.
UPDATE work_items w
SET status = 'cancelled', finished_at = @now::timestamptz
WHERE w.id = @id AND w.status = 'assigned' AND w.cancel_requested_at IS NOT NULL
  AND work_item_fence_matches(w, @workflow_id, @workflow_generation, @qualified_id,
        @subject_generation, @owner_id, @lease_generation,
        sqlc.narg('repository'), sqlc.narg('base_ref'), sqlc.narg('head_ref'))
RETURNING *;

-- name: WorkItemAuditInsert :exec
INSERT INTO work_item_audit (entry_id, at, method, from_status, to_status, reason)
VALUES (@entry_id, @at, @method, @from_status, @to_status, sqlc.narg('reason'));

-- name: WorkItemExpiredLeases :many
-- Assigned items whose lease expired, held by owners with the given prefix
-- (the built-in workers), oldest expiry first.
SELECT * FROM work_items
WHERE status = 'assigned' AND lease_expires_at <= @now::timestamptz
  AND lease_generation > 0 AND starts_with(lease_owner, @owner_prefix::text)
ORDER BY lease_expires_at
LIMIT @lim;

-- name: WorkItemEnqueueBlockers :many
-- Everything that decides an enqueue, in one statement: it sweeps expired
-- pending items (returned as 'swept', with their status as before the
-- sweep), and reads, from the statement's one snapshot, the item bound to
-- the key, the subject's live blocker (a live v2 item, highest generation
-- first, else a pending or held legacy one) and the live holder of the
-- reservation's collision key. A blocker that was just swept is no blocker:
-- the caller ignores those.
WITH swept AS (
    UPDATE work_items
    SET status = 'dropped', finished_at = @now::timestamptz
    WHERE id IN (
        SELECT x.id FROM work_items x
        WHERE x.status = 'pending' AND x.expires_after IS NOT NULL AND x.expires_after < @now::timestamptz
        ORDER BY x.expires_after
        LIMIT 100
        FOR UPDATE SKIP LOCKED
    )
    RETURNING id
)
(SELECT 'swept'::text AS why, sqlc.embed(w) FROM work_items w WHERE w.id IN (SELECT id FROM swept))
UNION ALL
(SELECT 'key'::text AS why, sqlc.embed(k) FROM work_items k
 WHERE @idempotency_key::text <> '' AND k.idempotency_key = @idempotency_key::text)
UNION ALL
(SELECT 'subject'::text AS why, sqlc.embed(s) FROM work_items s
 WHERE s.canonical_id = @canonical_id::text
   AND s.status IN ('pending', 'assigned', 'held')
   AND ((s.subject_generation IS NOT NULL) OR (s.subject_generation IS NULL AND s.status IN ('pending', 'held')))
   AND s.id NOT IN (SELECT id FROM swept)
 ORDER BY s.subject_generation DESC NULLS LAST, s.position
 LIMIT 1)
UNION ALL
(SELECT 'reservation'::text AS why, sqlc.embed(r) FROM work_items r
 WHERE @head_ref::text <> ''
   AND r.collision_key = lower(btrim(@repository::text)) || E'\n' || @head_ref::text
   AND r.status IN ('pending', 'assigned', 'held')
   AND r.id NOT IN (SELECT id FROM swept)
 LIMIT 1);

-- name: WorkItemInsertNextGeneration :one
-- Creates a v2 item with its subject's next generation in one statement.
-- The allocator row stays locked until the transaction ends, and any
-- failure of the insert aborts the transaction, so a generation is only
-- ever taken by an item that commits.
--
-- When the key is bound, the subject has a live item (or a pending or held
-- legacy one, which no index says) or the reservation is held, nothing is
-- allocated and no row comes back: the caller's full path answers. The
-- unique indexes still decide a race between two such probes. Answering
-- the common conflicts without an error matters beyond the error itself:
-- pgx drops a prepared statement whose execution failed, so every replay
-- would cost its connection the next five plans of this statement.
WITH gen AS (
    INSERT INTO subject_generations (qualified_id, last_generation)
    SELECT @canonical_id::text, 1
    WHERE NOT EXISTS (
        SELECT 1 FROM work_items k WHERE k.idempotency_key = sqlc.narg('idempotency_key'))
      AND NOT EXISTS (
        SELECT 1 FROM work_items l
        WHERE l.canonical_id = @canonical_id::text AND l.subject_generation IS NOT NULL
          AND l.status IN ('pending', 'assigned', 'held'))
      AND NOT EXISTS (
        SELECT 1 FROM work_items l
        WHERE l.canonical_id = @canonical_id::text AND l.subject_generation IS NULL
          AND l.status IN ('pending', 'held'))
      AND NOT EXISTS (
        SELECT 1 FROM work_items r
        WHERE r.collision_key = lower(btrim(sqlc.narg('repository'))) || E'\n' || sqlc.narg('head_ref')
          AND r.status IN ('pending', 'assigned', 'held') AND r.collision_key IS NOT NULL)
    ON CONFLICT (qualified_id) DO UPDATE
        SET last_generation = subject_generations.last_generation + 1
    RETURNING last_generation
)
INSERT INTO work_items (
    id, status, is_v2, subject_id, canonical_id, subject_generation, task_id,
    dispatch, enqueued_at, run_at, run_at_time, expire_after_secs, expires_after,
    idempotency_key, request_hash, repository, base_ref, head_ref, source, trace_parent
)
SELECT @id, 'pending', true, @canonical_id::text, @canonical_id::text, gen.last_generation,
    sqlc.narg('task_id'), @dispatch, @enqueued_at, sqlc.narg('run_at'), sqlc.narg('run_at_time'),
    sqlc.narg('expire_after_secs'), sqlc.narg('expires_after'), sqlc.narg('idempotency_key'),
    @request_hash, sqlc.narg('repository'), sqlc.narg('base_ref'), sqlc.narg('head_ref'), @source,
    sqlc.narg('trace_parent')
FROM gen
-- Only what the database chose: the caller holds every value it sent, and
-- scanning the whole row back (or sending the ~12 KB dispatch back) cost
-- more than the rest of the enqueue's client side together.
RETURNING position, subject_generation, collision_key;

-- name: WorkItemInsertNextGenerations :many
-- WorkItemInsertNextGeneration for a group of requests in one statement
-- (webhook deliveries committed together): each row is inserted, with its
-- subject's next generation, when its own probes find its key, subject and
-- reservation free, and the rows that were are returned. The probes see
-- what the statement began with, not its own rows: the caller sends rows
-- that differ in key, subject and reservation. Rows go in the order sent,
-- which locks the subjects' generation rows in that order. Every row has a
-- key and a reservation; an empty task ID or trace parent is none.
--
-- The probes are LATERAL lookups, one index probe per row whatever the
-- planner guesses of the group's size: as NOT EXISTS, a large guess made
-- them hash joins over the whole table, and a small exact one (unnest's)
-- made every execution plan the statement anew rather than reuse a generic
-- plan.
WITH input AS (
    SELECT ord, (@ids::uuid[])[ord] AS id, (@canonical_ids::text[])[ord] AS canonical_id,
        (@task_ids::text[])[ord] AS task_id, (@dispatches::jsonb[])[ord] AS dispatch,
        (@idempotency_keys::text[])[ord] AS idempotency_key, (@request_hashes::text[])[ord] AS request_hash,
        (@repositories::text[])[ord] AS repository, (@base_refs::text[])[ord] AS base_ref,
        (@head_refs::text[])[ord] AS head_ref, (@sources::text[])[ord] AS source,
        (@trace_parents::text[])[ord] AS trace_parent
    FROM generate_subscripts(@ids::uuid[], 1) AS ord
), free AS (
    SELECT i.* FROM input i
    LEFT JOIN LATERAL (
        SELECT true AS taken FROM work_items k WHERE k.idempotency_key = i.idempotency_key LIMIT 1
    ) key ON true
    LEFT JOIN LATERAL (
        SELECT true AS taken FROM work_items l
        WHERE l.canonical_id = i.canonical_id AND l.subject_generation IS NOT NULL
          AND l.status IN ('pending', 'assigned', 'held')
        LIMIT 1
    ) live ON true
    LEFT JOIN LATERAL (
        SELECT true AS taken FROM work_items l
        WHERE l.canonical_id = i.canonical_id AND l.subject_generation IS NULL
          AND l.status IN ('pending', 'held')
        LIMIT 1
    ) legacy ON true
    LEFT JOIN LATERAL (
        SELECT true AS taken FROM work_items r
        WHERE r.collision_key = lower(btrim(i.repository)) || E'\n' || i.head_ref
          AND r.status IN ('pending', 'assigned', 'held') AND r.collision_key IS NOT NULL
        LIMIT 1
    ) branch ON true
    WHERE key.taken IS NULL AND live.taken IS NULL AND legacy.taken IS NULL AND branch.taken IS NULL
), gen AS (
    INSERT INTO subject_generations (qualified_id, last_generation)
    SELECT canonical_id, 1 FROM free ORDER BY ord
    ON CONFLICT (qualified_id) DO UPDATE
        SET last_generation = subject_generations.last_generation + 1
    RETURNING qualified_id, last_generation
)
INSERT INTO work_items (
    id, status, is_v2, subject_id, canonical_id, subject_generation, task_id,
    dispatch, enqueued_at, idempotency_key, request_hash, repository, base_ref, head_ref, source, trace_parent
)
SELECT f.id, 'pending', true, f.canonical_id, f.canonical_id, gen.last_generation, NULLIF(f.task_id, ''),
    f.dispatch, @enqueued_at, f.idempotency_key, f.request_hash, f.repository, f.base_ref, f.head_ref, f.source,
    NULLIF(f.trace_parent, '')
FROM free f JOIN gen ON gen.qualified_id = f.canonical_id
ORDER BY f.ord
RETURNING id, position, subject_generation, collision_key;

-- name: WorkItemDropWaiting :one
-- An operator's drop: only a pending or held item, never a running one.
UPDATE work_items SET status = 'dropped', finished_at = @now::timestamptz
WHERE id = @id AND status IN ('pending', 'held')
RETURNING *;

-- name: WorkItemReclaimExpired :one
-- An operator gives an assigned item whose lease has expired back to
-- pending. A v2 item keeps its workflow and lease counters, as
-- release_pending does, so its next hand-out is one lease generation up
-- and the dead owner's fence stays stale; a legacy item forgets its lease.
UPDATE work_items
SET status = 'pending', assigned_at = NULL,
    workflow_id = CASE WHEN lease_generation = 0 THEN NULL ELSE workflow_id END,
    lease_expires_at = CASE WHEN lease_generation = 0 THEN NULL ELSE lease_expires_at END
WHERE id = @id AND status = 'assigned' AND lease_expires_at <= @now::timestamptz
RETURNING *;

-- name: WorkItemCancelInstallation :many
-- An installation deleted or suspended (or repositories removed from it,
-- when repository_ids is not empty): its pending and held items finish
-- cancelled.
UPDATE work_items
SET status = 'cancelled', finished_at = @now::timestamptz
WHERE status IN ('pending', 'held')
  AND dispatch #>> '{subject,metadata,installation_id}' = @installation_id::text
  AND (cardinality(@repository_ids::text[]) = 0
       OR dispatch #>> '{subject,metadata,repository_id}' = ANY (sqlc.arg('repository_ids')::text[]))
RETURNING *;

-- name: WorkItemRequestCancelInstallation :many
-- The same installation's (or repositories') assigned items are told to
-- stop at their next renew.
UPDATE work_items
SET cancel_requested_at = @now::timestamptz
WHERE status = 'assigned' AND cancel_requested_at IS NULL
  AND dispatch #>> '{subject,metadata,installation_id}' = @installation_id::text
  AND (cardinality(@repository_ids::text[]) = 0
       OR dispatch #>> '{subject,metadata,repository_id}' = ANY (sqlc.arg('repository_ids')::text[]))
RETURNING *;

-- name: WorkItemCancelEntry :one
-- One item cancelled on request (the check run's Cancel button, the
-- dashboard): pending or held, it finishes cancelled.
UPDATE work_items
SET status = 'cancelled', finished_at = @now::timestamptz
WHERE id = @id AND status IN ('pending', 'held')
RETURNING *;

-- name: WorkItemRequestCancelEntry :one
-- One assigned item asked to stop at its next renew.
UPDATE work_items
SET cancel_requested_at = @now::timestamptz
WHERE id = @id AND status = 'assigned' AND cancel_requested_at IS NULL
RETURNING *;

-- name: WorkItemEndingSet :exec
-- How items ended: the first reason given stays (a cancel's, over the
-- command's exit its worker reports after it), the exit status is the
-- worker's.
INSERT INTO work_item_endings (entry_id, end_reason, exit_code)
SELECT unnest(@entry_ids::uuid[]), sqlc.narg('end_reason'), sqlc.narg('exit_code')
ON CONFLICT (entry_id) DO UPDATE
SET end_reason = coalesce(work_item_endings.end_reason, EXCLUDED.end_reason),
    exit_code = coalesce(EXCLUDED.exit_code, work_item_endings.exit_code);

-- name: WorkItemEndingGet :one
SELECT end_reason, exit_code FROM work_item_endings WHERE entry_id = @entry_id;
