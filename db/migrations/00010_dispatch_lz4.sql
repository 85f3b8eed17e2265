-- +goose Up
-- New dispatches are compressed with lz4 instead of pglz
-- (docs/benchmarks-history.md, "Ingest at the durable floor"): a pull request's
-- ~12 KB dispatch is TOAST-compressed on every enqueue, and pglz spent about
-- 90 µs of the database's CPU on it where lz4 spends a fraction of that
-- (the value is about 30% larger: 6.4 KB instead of 4.9 KB). Existing values
-- keep their compression and read as before; nothing is rewritten, and only
-- the column's setting changes. A server built without lz4 keeps pglz.
-- Safe to run again after an interruption.
-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE work_items ALTER COLUMN dispatch SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available on this server: work_items.dispatch keeps pglz';
END
$$;
-- +goose StatementEnd

-- +goose Down
-- Migrations are additive; there is no down.
