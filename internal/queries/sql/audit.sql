-- The append-only audit trail. See internal/audit.

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
