-- +goose Up
-- Only the indexes the queries need, and a lease scan whose plan does not
-- depend on statistics (docs/benchmarks-history.md, "Leasing as the backlog grows").
-- Every statement is safe to run again after an interruption.

-- work_items_live_canonical held the same entries as the unique
-- work_items_live_subject for every v2 item: two indexes written per enqueue
-- for one lookup. The lookups by canonical_id now name their two cases, each
-- served by one partial index: live v2 items by work_items_live_subject,
-- live legacy items (no generation yet) by this one, empty on a v2 queue.
CREATE INDEX IF NOT EXISTS work_items_live_legacy ON work_items (canonical_id)
    WHERE status IN ('pending', 'assigned', 'held') AND subject_generation IS NULL;
DROP INDEX IF EXISTS work_items_live_canonical;

-- The lease scan: the next due pending items in queue order after position
-- after_position, locked with SKIP LOCKED. Right after a bulk enqueue, before
-- autovacuum has analysed the table, the planner believes the pending set is
-- a handful of rows and reads all of it with a bitmap scan and sorts it (an
-- on-disk sort of every pending item per lease). Walking
-- work_items_pending_position in order is right whatever the table holds, so
-- the scan runs with sorts and bitmap scans priced out.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION work_item_lease_candidates(
    now_at timestamptz, after_position bigint, scan integer
) RETURNS SETOF work_items LANGUAGE sql VOLATILE
SET enable_sort = off SET enable_bitmapscan = off AS $$
    SELECT * FROM work_items
    WHERE status = 'pending' AND (run_at_time IS NULL OR run_at_time <= now_at)
      AND position > after_position
    ORDER BY position
    LIMIT scan
    FOR UPDATE SKIP LOCKED
$$;
-- +goose StatementEnd

-- Fresh statistics and few dead pending-index entries on a busy queue:
-- every lease and completion moves rows out of the partial pending indexes.
ALTER TABLE work_items SET (
    autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 500,
    autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000);

-- +goose Down
-- Migrations are additive; there is no down.
