-- Reads of the operator dashboard (app/ui). Each is bounded (LIMIT) or
-- served by an index; none scans a whole table per page view. They only
-- read, and name the columns they show: the tables belong to queue,
-- webhook and app/outbox, which alone write them.

-- name: UIWorkItemCountsLive :many
-- Live items by status, from the live partial indexes.
SELECT status, count(*) AS n FROM work_items
WHERE status IN ('pending', 'assigned', 'held')
GROUP BY status;

-- name: UIWorkItemCountsAll :many
-- Every item by status: an index-only scan of work_items_status_newest.
-- It reads the whole index, so app/ui caches its answer.
SELECT status, count(*) AS n FROM work_items GROUP BY status;

-- name: UIWorkItemOldestPending :one
SELECT enqueued_at FROM work_items WHERE status = 'pending'
ORDER BY status, enqueued_at, id
LIMIT 1;

-- name: UIWorkItemLeaseOwners :many
-- Who holds assigned items: per lease owner, live and expired leases.
SELECT coalesce(lease_owner, '')::text AS owner,
       count(*) FILTER (WHERE lease_expires_at > @now::timestamptz) AS live,
       count(*) FILTER (WHERE lease_expires_at IS NULL OR lease_expires_at <= @now::timestamptz) AS expired
FROM work_items
WHERE status = 'assigned'
GROUP BY lease_owner
ORDER BY lease_owner;

-- name: UIWorkItemsNewest :many
-- A newest-first keyset page of items, optionally of one kind; the first
-- page passes the largest possible cursor.
SELECT w.id, w.subject_id, w.canonical_id, w.subject_generation, w.status, w.dispatch,
       w.repository, w.base_ref, w.head_ref, w.lease_owner, w.lease_expires_at,
       w.enqueued_at, w.assigned_at, w.held_at, w.finished_at,
       g.pr_number, g.pr_url, g.check_run_id, g.branch
FROM work_items w LEFT JOIN github_items g ON g.entry_id = w.id
WHERE (w.enqueued_at, w.id) < (@before_at::timestamptz, @before_id::uuid)
  AND (@kind::text = '' OR starts_with(w.canonical_id, @kind::text || ':'))
ORDER BY w.enqueued_at DESC, w.id DESC
LIMIT @lim;

-- name: UIWorkItemsNewestByStatus :many
-- UIWorkItemsNewest for one status, through work_items_status_newest.
SELECT w.id, w.subject_id, w.canonical_id, w.subject_generation, w.status, w.dispatch,
       w.repository, w.base_ref, w.head_ref, w.lease_owner, w.lease_expires_at,
       w.enqueued_at, w.assigned_at, w.held_at, w.finished_at,
       g.pr_number, g.pr_url, g.check_run_id, g.branch
FROM work_items w LEFT JOIN github_items g ON g.entry_id = w.id
WHERE w.status = @status::text
  AND (w.enqueued_at, w.id) < (@before_at::timestamptz, @before_id::uuid)
  AND (@kind::text = '' OR starts_with(w.canonical_id, @kind::text || ':'))
ORDER BY w.status, w.enqueued_at DESC, w.id DESC
LIMIT @lim;

-- name: UIWorkItemsOfRepository :many
-- UIWorkItemsNewest for one repository (owner/name, any case), through
-- work_items_repository_newest, optionally of one status and kind.
SELECT w.id, w.subject_id, w.canonical_id, w.subject_generation, w.status, w.dispatch,
       w.repository, w.base_ref, w.head_ref, w.lease_owner, w.lease_expires_at,
       w.enqueued_at, w.assigned_at, w.held_at, w.finished_at,
       g.pr_number, g.pr_url, g.check_run_id, g.branch
FROM work_items w LEFT JOIN github_items g ON g.entry_id = w.id
WHERE lower(w.dispatch #>> '{subject,metadata,repository}') = lower(@repository::text)
  AND (w.enqueued_at, w.id) < (@before_at::timestamptz, @before_id::uuid)
  AND (@status::text = '' OR w.status = @status::text)
  AND (@kind::text = '' OR starts_with(w.canonical_id, @kind::text || ':'))
ORDER BY lower(w.dispatch #>> '{subject,metadata,repository}'), w.enqueued_at DESC, w.id DESC
LIMIT @lim;

-- name: UIWorkItemsOfSubject :many
-- The generations of one subject, newest first, through
-- work_items_subject_generation.
SELECT w.id, w.subject_id, w.canonical_id, w.subject_generation, w.status, w.dispatch,
       w.repository, w.base_ref, w.head_ref, w.lease_owner, w.lease_expires_at,
       w.enqueued_at, w.assigned_at, w.held_at, w.finished_at,
       g.pr_number, g.pr_url, g.check_run_id, g.branch
FROM work_items w LEFT JOIN github_items g ON g.entry_id = w.id
WHERE w.canonical_id = @qualified_id::text AND w.subject_generation IS NOT NULL
  AND (@status::text = '' OR w.status = @status::text)
  AND (w.enqueued_at, w.id) < (@before_at::timestamptz, @before_id::uuid)
ORDER BY w.enqueued_at DESC, w.id DESC
LIMIT @lim;

-- name: UIWorkItem :one
-- One item for its page, in the list rows' shape.
SELECT w.id, w.subject_id, w.canonical_id, w.subject_generation, w.status, w.dispatch,
       w.repository, w.base_ref, w.head_ref, w.lease_owner, w.lease_expires_at,
       w.enqueued_at, w.assigned_at, w.held_at, w.finished_at,
       g.pr_number, g.pr_url, g.check_run_id, g.branch
FROM work_items w LEFT JOIN github_items g ON g.entry_id = w.id
WHERE w.id = @id;

-- name: UIWorkItemAudit :many
SELECT at, method, from_status, to_status, reason FROM work_item_audit WHERE entry_id = @entry_id ORDER BY id;

-- name: UIDeliveryOutcomesSince :many
SELECT outcome, count(*) AS n FROM deliveries
WHERE received_at >= @since::timestamptz
GROUP BY outcome;

-- name: UIDeliveriesNewest :many
-- A newest-first keyset page of deliveries, optionally of one outcome and
-- one event.
SELECT delivery_id, event, action, repository, sender, secret_index, received_at,
       attempts, outcome, reason, entry_id, qualified_id, generation
FROM deliveries
WHERE received_at <= @before_at::timestamptz
  AND (received_at, delivery_id) < (@before_at::timestamptz, @before_id::text)
  AND (@outcome::text = '' OR outcome = @outcome::text)
  AND (@event::text = '' OR event = @event::text)
ORDER BY received_at DESC, delivery_id DESC
LIMIT @lim;

-- name: UIDeliveriesOfEntry :many
-- The deliveries that named an item: the one that enqueued it, and
-- replays and collisions answered with it.
SELECT delivery_id, event, action, repository, sender, secret_index, received_at,
       attempts, outcome, reason, entry_id, qualified_id, generation
FROM deliveries WHERE entry_id = @entry_id ORDER BY received_at, delivery_id LIMIT 200;

-- name: UIOutboxCountsOpen :many
SELECT status, count(*) AS n FROM outbox WHERE status <> 'done' GROUP BY status;

-- name: UIOutboxOpen :many
-- Pending and failed GitHub writes, oldest first, a keyset page.
SELECT id, lane, kind, entry_id, created_at, available_at, attempts, status,
       finished_at, last_error, last_answer
FROM outbox
WHERE status <> 'done' AND id > @after_id
  AND (@status::text = '' OR status = @status::text)
ORDER BY id
LIMIT @lim;

-- name: UIOutboxOfEntry :many
SELECT id, lane, kind, entry_id, created_at, available_at, attempts, status,
       finished_at, last_error, last_answer
FROM outbox WHERE entry_id = @entry_id ORDER BY id LIMIT 200;
