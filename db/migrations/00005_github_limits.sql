-- +goose Up
-- What an outbox row already created on GitHub, so a retry resumes at its
-- first step not yet done: the initial commit of an issue item's branch
-- (created, the branch not yet), the branch head (created, the pull request
-- not yet), and the check run's current title and summary (an
-- annotations-only update must repeat them, and need not read them back).
ALTER TABLE github_items
    ADD COLUMN start_commit_sha text,
    ADD COLUMN branch_sha       text,
    ADD COLUMN check_title      text,
    ADD COLUMN check_summary    text;

-- The attempt at which a row last made progress: its backoff counts the
-- attempts since, so it starts over once a step got through.
ALTER TABLE outbox ADD COLUMN progress_attempts integer NOT NULL DEFAULT 0;

-- +goose Down
