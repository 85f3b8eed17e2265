-- The dashboard's own session state (app/ui writes these tables; see
-- migration 00019).

-- name: UISignOut :exec
-- Records a signed-out session until its cookie expires (UISignedOutPrune
-- deletes it after).
INSERT INTO ui_signed_out (nonce, expires_at) VALUES (sqlc.arg(nonce), sqlc.arg(expires_at))
ON CONFLICT (nonce) DO NOTHING;

-- name: UISignedOut :one
-- Reports whether the session of this nonce was signed out.
SELECT EXISTS (SELECT 1 FROM ui_signed_out WHERE nonce = sqlc.arg(nonce))::boolean AS signed_out;

-- name: UILoginBlockedUntil :one
-- When the client's sign-ins are blocked until, if they are at now.
SELECT blocked_until::timestamptz FROM ui_login_failures
WHERE client = sqlc.arg(client) AND blocked_until > sqlc.arg(now)::timestamptz;

-- name: UILoginFailed :one
-- Counts a failed sign-in of client at now in its window, which started
-- after window_since (else a new window starts now), and at the
-- limit_count-th failure of a window blocks the client until block_until,
-- and returns the client's block, if any (UILoginFailuresPrune deletes rows
-- whose window and block are both over).
INSERT INTO ui_login_failures AS f (client, window_start, failures, blocked_until)
VALUES (sqlc.arg(client), sqlc.arg(now)::timestamptz, 1,
        CASE WHEN sqlc.arg(limit_count)::integer <= 1 THEN sqlc.arg(block_until)::timestamptz END)
ON CONFLICT (client) DO UPDATE SET
    window_start = CASE WHEN f.window_start <= sqlc.arg(window_since)::timestamptz
                        THEN sqlc.arg(now)::timestamptz ELSE f.window_start END,
    failures = CASE WHEN f.window_start <= sqlc.arg(window_since)::timestamptz
                    THEN 1 ELSE f.failures + 1 END,
    blocked_until = CASE
        WHEN f.window_start > sqlc.arg(window_since)::timestamptz
             AND f.failures + 1 >= sqlc.arg(limit_count)::integer
        THEN sqlc.arg(block_until)::timestamptz
        ELSE f.blocked_until END
RETURNING f.blocked_until;

-- name: UISignedOutPrune :execrows
-- Deletes a batch of sign-out records whose cookies expired before before.
DELETE FROM ui_signed_out
WHERE nonce IN (
    SELECT nonce FROM ui_signed_out WHERE expires_at < @before::timestamptz ORDER BY expires_at LIMIT @batch
);

-- name: UILoginFailuresPrune :execrows
-- Deletes a batch of failed-sign-in rows whose window started and whose
-- block (if any) ended before before.
DELETE FROM ui_login_failures
WHERE client IN (
    SELECT client FROM ui_login_failures
    WHERE window_start < @before::timestamptz
      AND (blocked_until IS NULL OR blocked_until < @before::timestamptz)
    ORDER BY window_start LIMIT @batch
);
