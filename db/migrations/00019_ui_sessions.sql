-- +goose Up
-- The dashboard's server-side session state (owner: app/ui), shared by
-- every serve instance.
--
-- ui_signed_out lists sessions ended by signing out, by the nonce their
-- cookie carries, until the cookie would have expired anyway: a signed
-- cookie stays valid by its signature alone, so signing out must be
-- remembered where every instance looks. Rows are deleted once expired,
-- by the next sign-out.
CREATE TABLE IF NOT EXISTS ui_signed_out (
    nonce      text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS ui_signed_out_expires ON ui_signed_out (expires_at);

-- ui_login_failures counts failed sign-ins per client (its address) in a
-- one-minute window; the fifth within a window blocks the client's
-- sign-ins until blocked_until. A row whose window and block are over
-- counts nothing and is deleted by a later failure.
CREATE TABLE IF NOT EXISTS ui_login_failures (
    client        text PRIMARY KEY,
    window_start  timestamptz NOT NULL,
    failures      integer NOT NULL CHECK (failures > 0),
    blocked_until timestamptz
);
CREATE INDEX IF NOT EXISTS ui_login_failures_window ON ui_login_failures (window_start);

-- +goose Down
-- Migrations are additive; there is no down.
