-- +goose Up
-- The W3C traceparent an outbox row's send joins: the trace of the item or
-- delivery that caused the write (docs/observability.md). NULL when
-- tracing was off. A new nullable column without a default changes no
-- existing row.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS trace_parent text;

-- +goose Down
-- Migrations are additive; there is no down.
