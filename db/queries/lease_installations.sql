-- name: WorkItemLeaseFair :many
-- The next due pending items in turns over installations, the one served
-- least recently first, each in queue order, locked with SKIP LOCKED, none
-- of taken (migration 00015). cap 0 = no cap.
SELECT * FROM work_item_lease_fair(@now::timestamptz, @max_items::integer, @scan::integer, @cap::integer, @taken::uuid[]);

-- name: LeaseInstallationsLock :many
-- The cap's lock: the rows of the installations a lease takes items of,
-- skipping those another lease holds (their items are passed over, the
-- lease waits on nothing). Held until the lease commits, so each
-- installation's assigned count is read and raised by one lease at a time.
SELECT installation_id FROM lease_installations
WHERE installation_id = ANY (@installation_ids::bigint[])
ORDER BY installation_id
FOR UPDATE SKIP LOCKED;

-- name: WorkItemAssignedByInstallation :many
-- Assigned items of each installation, read after its row is locked.
SELECT installation_id, count(*)::integer AS assigned FROM work_items
WHERE status = 'assigned' AND installation_id = ANY (@installation_ids::bigint[])
GROUP BY installation_id;

-- name: LeaseInstallationsDrained :many
-- Of @installation_ids (none: the next @scan in turn order), those that
-- have no pending item left and whose lock this transaction could take
-- exclusively: no item of theirs is becoming pending right now (migration
-- 00015).
SELECT l.installation_id FROM (
    SELECT installation_id FROM lease_installations
    WHERE NOT idle AND (cardinality(@installation_ids::bigint[]) = 0 OR installation_id = ANY (@installation_ids::bigint[]))
    ORDER BY served, installation_id
    LIMIT @scan
) l
WHERE CASE WHEN EXISTS (SELECT 1 FROM work_items w WHERE w.status = 'pending' AND w.installation_id = l.installation_id)
           THEN false
           ELSE pg_try_advisory_xact_lock(1818583411, hashint8(l.installation_id)) END;

-- name: LeaseInstallationsRetire :execrows
-- Marks drained installations idle, looking again with the lock held, so
-- an item committed since the last look keeps its installation busy.
UPDATE lease_installations SET idle = true
WHERE installation_id IN (
        SELECT installation_id FROM lease_installations
        WHERE installation_id = ANY (@installation_ids::bigint[]) AND NOT idle
        FOR UPDATE SKIP LOCKED)
  AND NOT EXISTS (SELECT 1 FROM work_items w WHERE w.status = 'pending' AND w.installation_id = lease_installations.installation_id);

-- name: LeaseInstallationPause :exec
-- Keeps an installation's items from being leased until @until (its GitHub
-- credential is rate-limited); a later deadline already recorded stands.
INSERT INTO lease_installations (installation_id, paused_until) VALUES (@installation_id, @until::timestamptz)
ON CONFLICT (installation_id) DO UPDATE
SET paused_until = greatest(lease_installations.paused_until, excluded.paused_until);

-- name: LeaseInstallationsLoad :many
-- Per installation with items pending or assigned, or paused: its pending
-- and assigned items and its pause (the dashboard and /metrics;
-- installation 0: items over /rpc and stdio).
SELECT l.installation_id, l.paused_until,
       (SELECT count(*) FROM work_items w WHERE w.status = 'pending' AND w.installation_id = l.installation_id) AS pending,
       (SELECT count(*) FROM work_items w WHERE w.status = 'assigned' AND w.installation_id = l.installation_id) AS assigned
FROM lease_installations l
WHERE NOT l.idle OR l.paused_until > @now::timestamptz
   OR EXISTS (SELECT 1 FROM work_items a WHERE a.status = 'assigned' AND a.installation_id = l.installation_id)
ORDER BY l.installation_id
LIMIT @lim;
