-- switchyard.triage_items: the triage read model (internal/triage), and the
-- failures it tracks. sqlc.narg(now) overrides the database clock in tests.

-- name: TriageItemLock :one
-- TriageItemLock reads an item for a mutation and locks it until the
-- transaction ends, with the clock the mutation goes by.
SELECT sqlc.embed(i), coalesce(sqlc.narg(now)::timestamptz, now())::timestamptz AS db_now
FROM switchyard.triage_items i WHERE i.id = @id FOR UPDATE;

-- name: TriageItemGet :one
SELECT * FROM switchyard.triage_items WHERE id = @id;

-- name: TriageItemGetByRef :one
SELECT * FROM switchyard.triage_items WHERE kind = @kind AND ref = @ref;

-- name: TriageItemListByRefs :many
-- TriageItemListByRefs reads the items of one kind that track refs (a list
-- page shows each row's item; triage_items_tracked).
SELECT * FROM switchyard.triage_items WHERE kind = @kind AND ref = ANY(@refs::jsonb[]);

-- name: TriageItemListByIDs :many
SELECT * FROM switchyard.triage_items WHERE id = ANY(@ids::bigint[]) ORDER BY id;

-- name: TriageItemWrite :one
-- TriageItemWrite stores an item's new state (the read model) and bumps
-- its version; the caller appends the event of that version.
UPDATE switchyard.triage_items SET
    status = @status, ignored_until = sqlc.narg(ignored_until),
    assignee_id = sqlc.narg(assignee_id), assignee_name = sqlc.narg(assignee_name),
    claim_holder_id = sqlc.narg(claim_holder_id), claim_holder_name = sqlc.narg(claim_holder_name),
    claim_expires_at = sqlc.narg(claim_expires_at),
    version = version + 1, updated_at = now()
WHERE id = @id
RETURNING *;

-- name: TriageItemHeartbeat :one
-- TriageItemHeartbeat extends a live claim of its holder; no row: the
-- claim is not theirs (any more). Not an event: the log records who
-- claimed, not that their page stayed open.
UPDATE switchyard.triage_items
SET claim_expires_at = coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => @lease_seconds::float8)
WHERE id = @id AND claim_holder_id = @holder_id
  AND claim_expires_at > coalesce(sqlc.narg(now)::timestamptz, now())
RETURNING claim_expires_at;

-- name: TriageItemList :many
-- TriageItemList is the board: items of the given statuses (all when
-- empty) and kind (all when empty), optionally only one assignee's or
-- only unassigned ones, most recently changed first, after the keyset
-- cursor (updated_at, id).
SELECT * FROM switchyard.triage_items i
WHERE (cardinality(@statuses::text[]) = 0 OR i.status = ANY(@statuses::text[]))
  AND (@kind::text = '' OR i.kind = @kind::text)
  AND (NOT @unassigned::boolean OR i.assignee_id IS NULL)
  AND (sqlc.narg(assignee_id)::bigint IS NULL OR i.assignee_id = sqlc.narg(assignee_id)::bigint)
  AND (sqlc.narg(after_updated)::timestamptz IS NULL
       OR (i.updated_at, i.id) < (sqlc.narg(after_updated)::timestamptz, sqlc.narg(after_id)::bigint))
ORDER BY i.updated_at DESC, i.id DESC
LIMIT @page_size;

-- name: TriageItemCountByStatus :many
-- TriageItemCountByStatus counts items per status: the board's headline (the
-- table holds one row per failure group, not per failure).
SELECT status, count(*)::bigint AS items FROM switchyard.triage_items GROUP BY status;

-- name: TriageDeadGroupMessageList :many
-- TriageDeadGroupMessageList lists a dead-letter group's dead messages, oldest
-- first, for a replay from its item: status dead (switchyard.console_messages,
-- as the group counts them), so an original whose replay was delivered is
-- not replayed again. state = 'dead' lets outbox_dead_fingerprint serve it.
SELECT o.id FROM switchyard.console_messages o
WHERE o.state = 'dead' AND o.status = 'dead'
  AND (o.error_fingerprint = @fingerprint::text OR (@fingerprint::text = '' AND o.error_fingerprint IS NULL))
ORDER BY o.id
LIMIT @max_messages;

-- name: TriageBlockedHeadGet :one
-- TriageBlockedHeadGet is the dead message that blocks an aggregate.
SELECT dead_message_id FROM switchyard.outbox_blocked_aggregates
WHERE destination = @destination AND aggregate_type = @aggregate_type AND aggregate_id = @aggregate_id;

-- name: TriageTrack :exec
-- TriageTrack records that a tracked failure happened, in the caller's
-- transaction (switchyard.triage_track: create or reopen the item). The
-- triggers call the function themselves; this is for writers without one
-- (the reconciler's finding groups).
SELECT switchyard.triage_track(@kind::text, @ref::jsonb, @title::text, @why::text);
