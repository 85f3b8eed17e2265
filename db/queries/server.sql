-- Reads of the server a session is on (package db): whether it takes
-- writes and how durable a commit acknowledged to this session is.

-- name: ServerState :one
-- transaction_read_only is on for every session of a standby (in
-- recovery) and for a primary set read-only (default_transaction_read_only,
-- as tools demoting a primary do). synchronous_commit is this session's
-- own: DATABASE_URL's options can change it.
SELECT pg_is_in_recovery() AS in_recovery,
       current_setting('transaction_read_only') = 'on' AS read_only,
       current_setting('synchronous_standby_names') AS synchronous_standby_names,
       current_setting('synchronous_commit') AS synchronous_commit;
