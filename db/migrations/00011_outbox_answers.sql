-- +goose Up
-- GitHub's last answer to each outbox row, success included: the HTTP
-- status and a short summary of every call of the row's last attempt (what
-- was created or updated, or GitHub's message when it refused), bounded in
-- length. The sender writes it when it settles the row (done, retry or
-- fail); the dashboard shows it beside each GitHub write. Nullable, with no
-- default: adding it rewrites nothing, and running this again is harmless.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS last_answer text;

-- +goose Down
ALTER TABLE outbox DROP COLUMN IF EXISTS last_answer;
