-- switchyard.triage_presence: who is looking at what, on every instance.

-- name: TriagePresenceJoin :one
-- TriagePresenceJoin records (or moves) a connection's view and returns
-- the view it had before ('' if none).
WITH old AS (SELECT view FROM switchyard.triage_presence WHERE conn_id = @conn_id)
INSERT INTO switchyard.triage_presence AS p (conn_id, instance, account_id, account_name, view, expires_at)
VALUES (@conn_id, @instance, @account_id, @account_name, @view,
    coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => @ttl_seconds::float8))
ON CONFLICT (conn_id) DO UPDATE SET view = EXCLUDED.view, expires_at = EXCLUDED.expires_at
RETURNING coalesce((SELECT view FROM old), '')::text AS old_view;

-- name: TriagePresenceRefresh :execrows
-- TriagePresenceRefresh extends a connection's presence; 0 rows: it was
-- swept meanwhile (join again).
UPDATE switchyard.triage_presence
SET expires_at = coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => @ttl_seconds::float8)
WHERE conn_id = @conn_id;

-- name: TriagePresenceLeave :many
DELETE FROM switchyard.triage_presence WHERE conn_id = @conn_id RETURNING view;

-- name: TriagePresenceSweep :many
-- TriagePresenceSweep deletes the presence of connections whose
-- heartbeats stopped (a dead tab or instance) and returns the views they
-- left, once each.
WITH gone AS (
    DELETE FROM switchyard.triage_presence
    WHERE expires_at <= coalesce(sqlc.narg(now)::timestamptz, now())
    RETURNING view
)
SELECT DISTINCT view FROM gone ORDER BY view;

-- name: TriagePresenceList :many
-- TriagePresenceList is who looks at each of the views (distinct
-- accounts, by name).
SELECT DISTINCT view, account_name FROM switchyard.triage_presence
WHERE view = ANY(@views::text[]) AND expires_at > coalesce(sqlc.narg(now)::timestamptz, now())
ORDER BY view, account_name;
