-- +goose Up
-- One index for the assigned items instead of two: each installation's
-- assigned items (the cap's count, the dashboard's), and the lease expiries
-- the recovery scans read. Every version of an assigned row (a lease, a
-- renewal, a recovery) wrote an entry into both; now it writes one. The
-- expiry scans read all assigned items either way (they are as many as the
-- leases held, not the queue's depth). Safe to run again.

-- The table's strongest lock first: CREATE INDEX's share lock and then
-- DROP INDEX's exclusive one would deadlock with a lease that read the
-- table in between and then writes it.
LOCK TABLE work_items IN ACCESS EXCLUSIVE MODE;
CREATE INDEX IF NOT EXISTS work_items_assigned ON work_items (installation_id, lease_expires_at)
    WHERE status = 'assigned';
DROP INDEX IF EXISTS work_items_assigned_installation;
DROP INDEX IF EXISTS work_items_assigned_expiry;

-- +goose Down
-- Migrations are additive; there is no down.
