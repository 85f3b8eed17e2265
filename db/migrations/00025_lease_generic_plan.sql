-- +goose Up
-- The fair lease scan (work_item_lease_fair, migration 00015) runs one plan
-- for the session. Left to choose, PL/pgSQL's plan cache compares the
-- generic plan's cost with the custom plans' and, the scans priced out
-- both ways, plans the statement again on every call: about 0.4 ms of a
-- 0.3 ms statement (docs/BENCHMARKS.md). The plan is the same either way
-- (each installation's scan walks work_items_pending_installation in
-- order; docs/queue.md). Safe to run again.
ALTER FUNCTION work_item_lease_fair(timestamptz, integer, integer, integer, uuid[])
    SET plan_cache_mode = force_generic_plan;

-- +goose Down
-- Migrations are additive; there is no down.
