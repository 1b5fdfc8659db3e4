-- switchyard.sessions: signed-in sessions. See internal/auth.

-- name: SessionCreate :one
INSERT INTO switchyard.sessions (token_hash, user_id, expires_at, remote_addr)
VALUES (@token_hash, @user_id, now() + make_interval(secs => @lifetime_seconds::float8), @remote_addr)
RETURNING id, created_at, expires_at;

-- name: SessionTouch :one
-- SessionTouch finds a live session by its token's hash and marks it seen.
-- A session is live while not revoked, before its absolute expiry, within
-- the idle timeout since it was last seen, and while its account is
-- enabled. last_seen_at is written at most once per touch interval, so
-- page loads do not each write a row.
WITH live AS (
    SELECT s.id, s.user_id, s.created_at, s.last_seen_at, s.expires_at
    FROM switchyard.sessions s
    JOIN switchyard.users u ON u.id = s.user_id
    WHERE s.token_hash = @token_hash
      AND s.revoked_at IS NULL
      AND s.expires_at > now()
      AND s.last_seen_at > now() - make_interval(secs => @idle_seconds::float8)
      AND u.disabled_at IS NULL
), touched AS (
    UPDATE switchyard.sessions s SET last_seen_at = now()
    FROM live
    WHERE s.id = live.id AND live.last_seen_at < now() - make_interval(secs => @touch_seconds::float8)
    RETURNING s.id
)
SELECT live.id AS session_id, live.expires_at, u.id AS user_id, u.name, u.role
FROM live JOIN switchyard.users u ON u.id = live.user_id;

-- name: SessionRevoke :one
-- SessionRevoke ends one session; it returns its id, or no row when it was
-- already over.
UPDATE switchyard.sessions SET revoked_at = now()
WHERE id = @id AND revoked_at IS NULL
RETURNING id, user_id;

-- name: SessionRevokeUser :many
-- SessionRevokeUser ends every session of an account.
UPDATE switchyard.sessions s SET revoked_at = now()
FROM switchyard.users u
WHERE u.name = @name AND s.user_id = u.id AND s.revoked_at IS NULL
RETURNING s.id;

-- name: SessionListLive :many
SELECT s.id, s.created_at, s.last_seen_at, s.expires_at, s.remote_addr, u.name, u.role
FROM switchyard.sessions s JOIN switchyard.users u ON u.id = s.user_id
WHERE s.revoked_at IS NULL AND s.expires_at > now()
ORDER BY s.id DESC
LIMIT @max_rows;

-- name: SessionPrune :execrows
DELETE FROM switchyard.sessions
WHERE expires_at < now() - interval '1 day' OR revoked_at < now() - interval '1 day';

-- name: SessionDenialCount :one
-- SessionDenialCount counts a refused request of session @id and says
-- whether to record it in the audit trail now (due): the first refusal,
-- then at most one per @interval_seconds. A due refusal reports how many
-- went unrecorded before it (unaudited) and resets that count. The row
-- lock serialises concurrent refusals of one session across instances.
WITH old AS (
    SELECT s.id, s.denied_unaudited,
        (s.denied_audited_at IS NULL
            OR s.denied_audited_at <= now() - make_interval(secs => @interval_seconds::float8)) AS due
    FROM switchyard.sessions s
    WHERE s.id = @id
    FOR UPDATE
)
UPDATE switchyard.sessions s
SET denied_audited_at = CASE WHEN old.due THEN now() ELSE s.denied_audited_at END,
    denied_unaudited  = CASE WHEN old.due THEN 0 ELSE s.denied_unaudited + 1 END
FROM old
WHERE s.id = old.id
RETURNING old.due::boolean AS due, old.denied_unaudited::integer AS unaudited;
