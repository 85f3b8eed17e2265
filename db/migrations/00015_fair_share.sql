-- +goose Up
-- Fair share across installations (SPEC §7.1, docs/queue.md "Fair share,
-- caps and budgets"): leasing takes due items installation by installation
-- in turn, the installation served least recently first. Every statement
-- is safe to run again after an interruption.

-- The installation an item belongs to, for fair share and the cap: its
-- GitHub installation for an item of a verified delivery, 0 for every item
-- enqueued over /rpc or stdio (one more installation, whatever its dispatch
-- claims). Derived from the row, so no enqueue statement changes; recomputed
-- only when source or dispatch is written, which no lease or completion does.
-- Adding it rewrites the table once.
ALTER TABLE work_items ADD COLUMN IF NOT EXISTS installation_id bigint NOT NULL
    GENERATED ALWAYS AS (
        CASE WHEN source = 'github' AND (dispatch #>> '{subject,metadata,installation_id}') ~ '^[0-9]{1,18}$'
             THEN (dispatch #>> '{subject,metadata,installation_id}')::bigint
             ELSE 0 END) STORED;

-- One installation's due items in queue order (the lease's scan within an
-- installation), and its assigned items (the cap's count).
CREATE INDEX IF NOT EXISTS work_items_pending_installation ON work_items (installation_id, position)
    WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS work_items_assigned_installation ON work_items (installation_id)
    WHERE status = 'assigned';

-- One row per installation that has had pending items: when it was last
-- served (a ticket from lease_installations_served; 0 = never, so a new
-- installation is served first), whether it is idle (no pending items: the
-- lease's scan passes it by index), and until when its GitHub credential
-- is rate-limited (its items wait until then, on every instance). Owned by
-- queue.
CREATE SEQUENCE IF NOT EXISTS lease_installations_served;
CREATE TABLE IF NOT EXISTS lease_installations (
    installation_id bigint PRIMARY KEY,
    served          bigint NOT NULL DEFAULT 0,
    idle            boolean NOT NULL DEFAULT false,
    paused_until    timestamptz
);
CREATE INDEX IF NOT EXISTS lease_installations_turn ON lease_installations (served, installation_id) WHERE NOT idle;

-- An item that becomes pending makes its installation busy again. The
-- shared advisory lock (class 'leas') is held until the item's transaction
-- ends; a lease marks an installation idle only while it holds the same lock
-- exclusively (pg_try_advisory_xact_lock) and, after taking it, sees no
-- pending item: so an item committed meanwhile is seen, and one still in
-- flight waits and turns the installation busy again after the lease's
-- commit. The check before the upsert keeps the common case (already busy)
-- free of row locks: enqueues of one installation never wait on each other.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION work_items_note_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1818583411, hashint8(NEW.installation_id));
    PERFORM 1 FROM lease_installations WHERE installation_id = NEW.installation_id AND NOT idle;
    IF NOT FOUND THEN
        INSERT INTO lease_installations (installation_id) VALUES (NEW.installation_id)
        ON CONFLICT (installation_id) DO UPDATE SET idle = false WHERE lease_installations.idle;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE OR REPLACE TRIGGER work_items_pending_insert AFTER INSERT ON work_items
    FOR EACH ROW WHEN (NEW.status = 'pending') EXECUTE FUNCTION work_items_note_pending();
CREATE OR REPLACE TRIGGER work_items_pending_update AFTER UPDATE OF status ON work_items
    FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status <> 'pending') EXECUTE FUNCTION work_items_note_pending();

INSERT INTO lease_installations (installation_id)
SELECT DISTINCT installation_id FROM work_items WHERE status = 'pending'
ON CONFLICT (installation_id) DO UPDATE SET idle = false;

-- The fair lease scan: up to max_items due pending items, taken in turns
-- over the installations that have them, the one served least recently
-- first, each in queue order. At most scan installations are examined (not
-- idle, not rate-limited, under the cap; never served first, then by
-- installation ID); of those with a due item not in
-- taken, the first max_items take part, each with an equal share
-- (ceil(max_items / n), less under the cap), so no more rows are locked
-- than one row short of a share each. Rows come in turn order: every
-- installation's first item, then every second, and so on. cap 0 = none;
-- the cap leaves installation 0 (/rpc and stdio items) alone. The cap's
-- count here is a snapshot: Store.Lease checks it again under the
-- installation's row lock. Sequential and bitmap scans are priced out, so
-- each installation's scan walks work_items_pending_installation in order
-- whatever the statistics say (right after a bulk enqueue the planner
-- believes the pending set tiny, migration 00009); the only sorts are of the
-- few rows picked. JIT is off: pricing a plan out makes it look expensive
-- enough to compile, which costs half a second for a statement of 0.3 ms.
-- PL/pgSQL keeps the statement's plan for the session; a SQL function
-- plans it again on every call, about 5 ms here, 15 times the statement.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION work_item_lease_fair(
    now_at timestamptz, max_items integer, scan integer, cap integer, taken uuid[]
) RETURNS SETOF work_items LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off SET enable_bitmapscan = off SET jit = off AS $$
BEGIN
    RETURN QUERY
    WITH inst AS MATERIALIZED (
        SELECT i.installation_id, i.served, i.room FROM (
            SELECT l.installation_id, l.served,
                   CASE WHEN cap = 0 OR l.installation_id = 0 THEN max_items
                        ELSE cap - (SELECT count(*) FROM (
                                        SELECT 1 FROM work_items a
                                        WHERE a.status = 'assigned' AND a.installation_id = l.installation_id
                                        LIMIT cap) c)::integer
                   END AS room
            FROM lease_installations l
            WHERE NOT l.idle AND (l.paused_until IS NULL OR l.paused_until <= now_at)
            ORDER BY l.served, l.installation_id
            LIMIT scan
        ) i
        WHERE i.room > 0 AND EXISTS (
            SELECT 1 FROM work_items w
            WHERE w.status = 'pending' AND w.installation_id = i.installation_id
              AND (w.run_at_time IS NULL OR w.run_at_time <= now_at)
              AND w.id <> ALL (taken))
        ORDER BY i.served, i.installation_id
        LIMIT max_items
    ), share AS (
        SELECT (max_items + count(*)::integer - 1) / greatest(count(*)::integer, 1) AS per FROM inst
    ), picked AS (
        SELECT c AS item, inst.served, inst.installation_id,
               row_number() OVER (PARTITION BY inst.installation_id ORDER BY c.position) AS turn
        FROM inst CROSS JOIN share CROSS JOIN LATERAL (
            SELECT * FROM work_items w
            WHERE w.status = 'pending' AND w.installation_id = inst.installation_id
              AND (w.run_at_time IS NULL OR w.run_at_time <= now_at)
              AND w.id <> ALL (taken)
            ORDER BY w.position
            LIMIT least(share.per, inst.room)
            FOR UPDATE SKIP LOCKED
        ) c
    )
    SELECT (p.item).* FROM picked p ORDER BY p.turn, p.served, p.installation_id LIMIT max_items;
END
$$;
-- +goose StatementEnd

-- The global-order scan the fair scan replaces.
DROP FUNCTION IF EXISTS work_item_lease_candidates(timestamptz, bigint, integer);

-- +goose Down
-- Migrations are additive; there is no down.
