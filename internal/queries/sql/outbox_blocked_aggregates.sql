-- switchyard.outbox_blocked_aggregates: aggregates held by a dead head
-- (internal/console/aggregates_blocked_list.go and the dispatcher).

-- name: BlockedAggregateListOlder :many
-- BlockedAggregateListOlder lists the aggregates held by a dead head,
-- longest blocked first, after the keyset of the last row shown
-- (outbox_blocked_aggregates_since). waiting counts the pending messages
-- behind the head, up to 1,000 (outbox_pending_ordered).
SELECT b.destination, b.aggregate_type, b.aggregate_id, b.dead_message_id, b.blocked_at,
    (SELECT count(*) FROM (
        SELECT 1 FROM switchyard.outbox o
        WHERE o.state = 'pending' AND o.aggregate_id <> '' AND o.destination = b.destination
          AND o.aggregate_type = b.aggregate_type AND o.aggregate_id = b.aggregate_id
        LIMIT 1000) AS w)::bigint AS waiting
FROM switchyard.outbox_blocked_aggregates b
WHERE sqlc.narg(blocked_at)::timestamptz IS NULL
   OR (b.blocked_at, b.destination, b.aggregate_type, b.aggregate_id)
      > (sqlc.narg(blocked_at)::timestamptz, sqlc.arg(destination)::text, sqlc.arg(aggregate_type)::text, sqlc.arg(aggregate_id)::text)
ORDER BY b.blocked_at, b.destination, b.aggregate_type, b.aggregate_id
LIMIT @max_rows;

-- name: BlockedAggregateListNewer :many
SELECT b.destination, b.aggregate_type, b.aggregate_id, b.dead_message_id, b.blocked_at,
    (SELECT count(*) FROM (
        SELECT 1 FROM switchyard.outbox o
        WHERE o.state = 'pending' AND o.aggregate_id <> '' AND o.destination = b.destination
          AND o.aggregate_type = b.aggregate_type AND o.aggregate_id = b.aggregate_id
        LIMIT 1000) AS w)::bigint AS waiting
FROM switchyard.outbox_blocked_aggregates b
WHERE (b.blocked_at, b.destination, b.aggregate_type, b.aggregate_id)
      < (sqlc.arg(blocked_at)::timestamptz, sqlc.arg(destination)::text, sqlc.arg(aggregate_type)::text, sqlc.arg(aggregate_id)::text)
ORDER BY b.blocked_at DESC, b.destination DESC, b.aggregate_type DESC, b.aggregate_id DESC
LIMIT @max_rows;

-- name: BlockedAggregateListForDestinations :many
SELECT b.destination, b.aggregate_type, b.aggregate_id, b.dead_message_id, b.blocked_at,
    (SELECT count(*) FROM switchyard.outbox o
     WHERE o.state = 'pending' AND o.destination = b.destination
       AND o.aggregate_type = b.aggregate_type AND o.aggregate_id = b.aggregate_id) AS waiting
FROM switchyard.outbox_blocked_aggregates b
ORDER BY b.blocked_at, b.destination, b.aggregate_type, b.aggregate_id
LIMIT @max_rows;
