-- name: ChangeAppend :exec
-- ChangeAppend records a change in the writer's transaction (design: see
-- migrations/00006_changefeed.sql and internal/changefeed). Never NOTIFY
-- in that transaction (ARCHITECTURE.md, invariant 9): see ChangeNotify.
INSERT INTO switchyard.changes (kind, subject, payload)
VALUES (@kind, @subject, @payload);

-- name: ChangeNotify :exec
-- ChangeNotify wakes the console's listeners after the writer committed.
-- The payload is empty: the rows are the message, the NOTIFY a wake-up.
SELECT pg_notify('switchyard_changes', '');

-- name: ChangeListen :exec
-- ChangeListen subscribes the listener's dedicated connection.
LISTEN switchyard_changes;

-- name: ChangeListAfter :many
-- ChangeListAfter returns up to batch_size changes after the cursor
-- (after_xid, after_id) in cursor order. settled is true for rows whose
-- transaction is older than every transaction still running: those can be
-- delivered, and no row can ever appear before them. Unsettled rows come
-- last (their xid is at least the watermark) and must be read again later.
SELECT id, xid, kind, subject, payload, created_at,
    (xid < pg_snapshot_xmin(pg_current_snapshot()))::boolean AS settled
FROM switchyard.changes
WHERE (xid, id) > (@after_xid::xid8, @after_id::bigint)
ORDER BY xid, id
LIMIT @batch_size;

-- name: ChangeListRange :many
-- ChangeListRange returns up to batch_size settled changes in
-- (after, up_to], in cursor order: what a resuming client missed.
SELECT id, xid, kind, subject, payload, created_at
FROM switchyard.changes
WHERE (xid, id) > (@after_xid::xid8, @after_id::bigint)
  AND (xid, id) <= (@up_to_xid::xid8, @up_to_id::bigint)
ORDER BY xid, id
LIMIT @batch_size;

-- name: ChangeHead :one
-- ChangeHead is the cursor of the newest settled change (no row when there
-- is none): where a listener that should not replay history starts.
SELECT xid, id FROM switchyard.changes
WHERE xid < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY xid DESC, id DESC
LIMIT 1;

-- name: ChangePrunedCursor :one
-- ChangePrunedCursor is the highest cursor retention has deleted.
SELECT xid, id FROM switchyard.changes_pruned;

-- name: ChangePrune :one
-- ChangePrune deletes up to batch_size settled changes created before
-- cutoff, oldest cursor first, and raises the pruned cursor to the highest
-- one deleted, in one statement. It returns how many rows it deleted.
WITH doomed AS (
    SELECT c.id FROM switchyard.changes c
    WHERE c.xid < pg_snapshot_xmin(pg_current_snapshot()) AND c.created_at < @cutoff
    ORDER BY c.xid, c.id
    LIMIT @batch_size
), deleted AS (
    DELETE FROM switchyard.changes c USING doomed
    WHERE c.id = doomed.id
    RETURNING c.xid, c.id
), top AS (
    SELECT d.xid, d.id FROM deleted d ORDER BY d.xid DESC, d.id DESC LIMIT 1
), raised AS (
    UPDATE switchyard.changes_pruned p
    SET xid = top.xid, id = top.id, pruned_at = now()
    FROM top
    WHERE (top.xid, top.id) > (p.xid, p.id)
    RETURNING 1
)
SELECT count(*) FROM deleted;
