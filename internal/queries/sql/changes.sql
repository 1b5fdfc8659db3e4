-- switchyard.changes: the change feed (internal/changefeed).

-- name: ChangeAppend :exec
-- ChangeAppend records a change in the writer's transaction (design: see
-- migrations/00005_changes.sql and internal/changefeed). Never NOTIFY
-- in that transaction (ARCHITECTURE.md, invariant 9): see ChangeNotify.
INSERT INTO switchyard.changes (kind, subject, payload)
VALUES (@kind, @subject, @payload);

-- name: ChangeNotify :exec
-- ChangeNotify wakes the console's listeners after the writer committed.
-- The payload is empty: the rows are the message, the NOTIFY a wake-up.
-- The channel is an argument so that the statement is prepared and its
-- plan kept (see OutboxNotify).
SELECT pg_notify(@channel::text, '');

-- name: ChangeListen :exec
-- ChangeListen subscribes the listener's dedicated connection.
LISTEN switchyard_changes;

-- name: ChangeSnapshotGet :one
-- ChangeSnapshotGet is the reader's snapshot: xmax (the first transaction id
-- not yet assigned) and the transactions still in progress, oldest first.
-- Run in a REPEATABLE READ transaction, it is the snapshot that the
-- transaction's other reads see: every row they return is committed, and
-- a row that is not returned belongs to a transaction in in_progress or
-- at or after xmax (design: internal/changefeed, Position).
SELECT pg_snapshot_xmax(s)::xid8 AS xmax,
    ARRAY(SELECT x FROM pg_snapshot_xip(s) AS x ORDER BY x)::xid8[] AS in_progress
FROM pg_current_snapshot() AS s;

-- name: ChangeListAfter :many
-- ChangeListAfter returns up to batch_size committed changes after the
-- cursor (after_xid, after_id) in cursor order.
SELECT id, xid, kind, subject, payload, created_at
FROM switchyard.changes
WHERE (xid, id) > (@after_xid::xid8, @after_id::bigint)
ORDER BY xid, id
LIMIT @batch_size;

-- name: ChangeListOpen :many
-- ChangeListOpen returns up to batch_size committed changes of the given
-- transactions whose id is in (seen, upto] (one seen and one upto per
-- transaction), in cursor order: the rows of transactions a reader
-- remembered as open, once they ended. kinds and subjects, when not
-- empty, keep only changes of those kinds and subjects.
SELECT c.id, c.xid, c.kind, c.subject, c.payload, c.created_at
FROM generate_subscripts(@xids::xid8[], 1) AS o(i)
CROSS JOIN LATERAL (
    SELECT c.id, c.xid, c.kind, c.subject, c.payload, c.created_at
    FROM switchyard.changes c
    WHERE c.xid = (@xids::xid8[])[o.i]
      AND c.id > (@seen::bigint[])[o.i] AND c.id <= (@upto::bigint[])[o.i]
      AND (cardinality(@kinds::text[]) = 0 OR c.kind = ANY(@kinds::text[]))
      AND (cardinality(@subjects::text[]) = 0 OR c.subject = ANY(@subjects::text[]))
    ORDER BY c.id
    LIMIT @batch_size
) c
ORDER BY c.xid, c.id
LIMIT @batch_size;

-- name: ChangeListRange :many
-- ChangeListRange returns up to batch_size changes in (after, up_to], in
-- cursor order, leaving out the rows of the transactions open at up_to
-- (open_xids, with the last id delivered of each in open_seen): what a
-- resuming client missed, when it asked for every kind. The open rows are
-- left out by a filter (a subplan over at most MaxOpen entries per row
-- read), not an anti-join, which would cost the ordered LIMIT its index
-- walk (EXPLAIN.md).
SELECT c.id, c.xid, c.kind, c.subject, c.payload, c.created_at
FROM switchyard.changes c
WHERE (c.xid, c.id) > (@after_xid::xid8, @after_id::bigint)
  AND (c.xid, c.id) <= (@up_to_xid::xid8, @up_to_id::bigint)
  AND c.id <= coalesce((SELECT (@open_seen::bigint[])[o.i] FROM generate_subscripts(@open_xids::xid8[], 1) AS o(i)
                        WHERE (@open_xids::xid8[])[o.i] = c.xid), 9223372036854775807)
ORDER BY c.xid, c.id
LIMIT @batch_size;

-- name: ChangeListRangeByKind :many
-- ChangeListRangeByKind is ChangeListRange for the changes of some kinds:
-- one bounded walk of changes_kind_cursor per kind, so that a stream of a
-- rare kind resumes across a day of frequent ones.
SELECT c.id, c.xid, c.kind, c.subject, c.payload, c.created_at
FROM unnest(@kinds::text[]) AS k(kind)
CROSS JOIN LATERAL (
    SELECT c.id, c.xid, c.kind, c.subject, c.payload, c.created_at
    FROM switchyard.changes c
    WHERE c.kind = k.kind
      AND (c.xid, c.id) > (@after_xid::xid8, @after_id::bigint)
      AND (c.xid, c.id) <= (@up_to_xid::xid8, @up_to_id::bigint)
      AND c.id <= coalesce((SELECT (@open_seen::bigint[])[o.i] FROM generate_subscripts(@open_xids::xid8[], 1) AS o(i)
                            WHERE (@open_xids::xid8[])[o.i] = c.xid), 9223372036854775807)
    ORDER BY c.xid, c.id
    LIMIT @batch_size
) c
ORDER BY c.xid, c.id
LIMIT @batch_size;

-- name: ChangeListRangeBySubject :many
-- ChangeListRangeBySubject is ChangeListRange for the changes of some
-- kinds and some subjects (one message's page): one bounded walk of
-- changes_subject_cursor per kind and subject.
SELECT c.id, c.xid, c.kind, c.subject, c.payload, c.created_at
FROM unnest(@kinds::text[]) AS k(kind)
CROSS JOIN unnest(@subjects::text[]) AS s(subject)
CROSS JOIN LATERAL (
    SELECT c.id, c.xid, c.kind, c.subject, c.payload, c.created_at
    FROM switchyard.changes c
    WHERE c.kind = k.kind AND c.subject = s.subject
      AND (c.xid, c.id) > (@after_xid::xid8, @after_id::bigint)
      AND (c.xid, c.id) <= (@up_to_xid::xid8, @up_to_id::bigint)
      AND c.id <= coalesce((SELECT (@open_seen::bigint[])[o.i] FROM generate_subscripts(@open_xids::xid8[], 1) AS o(i)
                            WHERE (@open_xids::xid8[])[o.i] = c.xid), 9223372036854775807)
    ORDER BY c.xid, c.id
    LIMIT @batch_size
) c
ORDER BY c.xid, c.id
LIMIT @batch_size;

-- name: ChangePrunedCursorGet :one
-- ChangePrunedCursorGet is the highest cursor retention has deleted.
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
