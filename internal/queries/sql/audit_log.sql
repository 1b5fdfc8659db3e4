-- switchyard.audit_log: the append-only audit trail. See internal/audit.

-- name: AuditInsert :one
-- AuditInsert appends one row; the chaining trigger assigns its id and
-- hashes.
INSERT INTO switchyard.audit_log (actor, actor_id, action, target, reason, outcome, request_id, remote_addr, detail, prev_hash, hash)
VALUES (@actor, @actor_id, @action, @target, @reason, @outcome, @request_id, @remote_addr, @detail, '', '')
RETURNING id, at;

-- name: AuditList :many
-- AuditList reads one page, newest first, strictly before the cursor id
-- (0: from the newest), optionally for one actor and one action.
SELECT id, at, actor, action, target, reason, outcome, request_id, remote_addr, detail
FROM switchyard.audit_log
WHERE (@before_id::bigint = 0 OR id < @before_id::bigint)
  AND (@actor::text = '' OR actor = @actor::text)
  AND (@action::text = '' OR action = @action::text)
ORDER BY id DESC
LIMIT @max_rows;

-- name: AuditVerify :one
-- AuditVerify recomputes the chain: it returns the first row whose hash or
-- link is wrong (0: none) and how many rows it checked.
SELECT coalesce(min(c.id) FILTER (WHERE NOT c.ok), 0)::bigint AS first_bad_id, count(*)::bigint AS checked
FROM (
    SELECT a.id,
           a.prev_hash = coalesce(lag(a.hash) OVER (ORDER BY a.id), '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea)
           AND a.hash = switchyard.audit_row_hash(a.prev_hash, a) AS ok
    FROM switchyard.audit_log a
) c;

-- name: AuditHeadIDGet :one
-- AuditHeadIDGet is the newest row's id (no row: the trail is empty); cheap,
-- unlike AuditHeadGet's count.
SELECT a.id FROM switchyard.audit_log a ORDER BY a.id DESC LIMIT 1;

-- name: AuditHeadGet :one
-- AuditHeadGet is the newest row's id and hash, and how many rows the trail
-- holds: what a checkpoint records. No row: the trail is empty.
SELECT a.id, a.hash, (SELECT count(*) FROM switchyard.audit_log)::bigint AS rows
FROM switchyard.audit_log a
ORDER BY a.id DESC
LIMIT 1;

-- name: AuditGetAt :one
-- AuditGetAt compares the trail with a checkpoint at row @id: that row's hash
-- (NULL: no such row), how many rows there are up to it, and the trail's
-- newest id and size now.
SELECT
    (SELECT a.hash FROM switchyard.audit_log a WHERE a.id = @id) AS hash,
    (SELECT count(*) FROM switchyard.audit_log a WHERE a.id <= @id)::bigint AS rows_upto,
    (SELECT coalesce(max(a.id), 0) FROM switchyard.audit_log a)::bigint AS max_id,
    (SELECT count(*) FROM switchyard.audit_log a)::bigint AS rows;

-- name: AuditListActions :many
-- AuditListActions lists every action recorded, in order, by a skip scan of
-- audit_log_action (action, id): one index probe per distinct action,
-- never a scan of the trail, however long it grows.
WITH RECURSIVE found AS (
    (SELECT a.action FROM switchyard.audit_log a ORDER BY a.action LIMIT 1)
    UNION ALL
    SELECT (SELECT a.action FROM switchyard.audit_log a WHERE a.action > found.action ORDER BY a.action LIMIT 1)
    FROM found
    WHERE found.action IS NOT NULL
)
SELECT found.action::text AS action FROM found WHERE found.action IS NOT NULL;
