-- +goose Up
-- A work item's compressed dispatch stays in its row up to a row of about
-- 8 KB instead of being moved to the TOAST table past 2 KB
-- (docs/benchmarks-history.md, "Fourth round"). A pull request's ~12 KB dispatch
-- compresses to about 7 KB: stored out of line it cost every enqueue four
-- TOAST rows and their index entries (about 12% of the database's CPU per
-- webhook delivery), and every read of the dispatch (a lease, the
-- dashboard) the lookups to put it back together. Updates copy the whole
-- row instead of a pointer; BenchmarkLifecycleLargeDispatch measures an
-- item's enqueue, lease, renewals and completion at the same cost either
-- way. A larger dispatch is still compressed and moved out of line. Only
-- the table's setting changes: nothing is rewritten, and existing rows read
-- as before.
ALTER TABLE work_items SET (toast_tuple_target = 8160);

-- +goose Down
-- Migrations are additive; there is no down.
