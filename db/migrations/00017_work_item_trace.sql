-- +goose Up
-- The W3C traceparent of the trace a work item belongs to (the webhook
-- delivery that created it, docs/observability.md), so the outbox writes
-- and the worker command it causes join that trace whenever and on
-- whichever instance they run. NULL when tracing was off. A new nullable
-- column without a default changes no existing row.
ALTER TABLE work_items ADD COLUMN IF NOT EXISTS trace_parent text;

-- +goose Down
-- Migrations are additive; there is no down.
