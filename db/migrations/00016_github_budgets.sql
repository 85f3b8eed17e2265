-- +goose Up
-- What GitHub's headers last said of each installation's request budget
-- (x-ratelimit-remaining, -limit, -reset) and, when a call was refused or
-- paced, until when no call with its credential starts and why. Written by
-- app/github's limiter (at most every few seconds per installation, at once
-- on a limit), read by the dashboard and /metrics, so every instance shows
-- the same. Safe to run again.
CREATE TABLE IF NOT EXISTS github_budgets (
    installation_id bigint PRIMARY KEY,
    remaining       integer,
    "limit"         integer,
    reset_at        timestamptz,
    limited_until   timestamptz,
    limited_reason  text,
    observed_at     timestamptz NOT NULL
);

-- +goose Down
DROP TABLE IF EXISTS github_budgets;
