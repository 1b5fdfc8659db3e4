-- The console's dead-letter and blocked-aggregate pages
-- (internal/console/deadletters_list.go, deadletter_group_show.go,
-- aggregates_blocked_list.go). Plans: internal/console/EXPLAIN.md.

-- name: ConsoleDeadLetterGroupsOlder :many
-- ConsoleDeadLetterGroupsOlder pages through the groups, most recently
-- seen first, after the keyset (last_dead_at, fingerprint) of the last row
-- shown; a NULL cursor starts at the top. dead_letter_groups_last.
SELECT * FROM switchyard.dead_letter_groups g
WHERE g.dead > 0
  AND (sqlc.narg(last_dead_at)::timestamptz IS NULL
       OR g.last_dead_at < sqlc.narg(last_dead_at)::timestamptz
       OR (g.last_dead_at = sqlc.narg(last_dead_at)::timestamptz AND g.fingerprint > sqlc.arg(fingerprint)::text))
ORDER BY g.last_dead_at DESC, g.fingerprint
LIMIT @max_rows;

-- name: ConsoleDeadLetterGroupsNewer :many
-- ConsoleDeadLetterGroupsNewer is the page before a cursor, in reverse
-- order (the caller reverses it).
SELECT * FROM switchyard.dead_letter_groups g
WHERE g.dead > 0
  AND (g.last_dead_at > sqlc.arg(last_dead_at)::timestamptz
       OR (g.last_dead_at = sqlc.arg(last_dead_at)::timestamptz AND g.fingerprint < sqlc.arg(fingerprint)::text))
ORDER BY g.last_dead_at, g.fingerprint DESC
LIMIT @max_rows;

-- name: ConsoleDeadLetterGroupGet :one
SELECT * FROM switchyard.dead_letter_groups WHERE fingerprint = @fingerprint;

-- name: ConsoleDeadLetterTrends :many
-- ConsoleDeadLetterTrends returns the hourly dead counts of the given
-- groups over the last @hours hours, by the database's clock: slot 0 is the
-- oldest hour, @hours - 1 the current one (primary key (fingerprint, hour)).
SELECT h.fingerprint,
    (sqlc.arg(hours)::int - 1 - (extract(epoch FROM date_trunc('hour', now()) - h.hour) / 3600)::int)::int AS slot,
    h.dead
FROM switchyard.dead_letter_hours h
WHERE h.fingerprint = ANY (sqlc.arg(fingerprints)::text[])
  AND h.hour > date_trunc('hour', now()) - make_interval(hours => sqlc.arg(hours)::int)
ORDER BY h.fingerprint, h.hour;

-- name: ConsoleDeadLetterMessagesOlder :many
-- ConsoleDeadLetterMessagesOlder lists a group's messages, newest first,
-- below a cursor (outbox_dead_fingerprint): dead and never replayed, as
-- the group counts them (status, switchyard.console_messages).
SELECT o.* FROM switchyard.console_messages o
WHERE o.state = 'dead' AND o.status = 'dead' AND o.error_fingerprint = sqlc.arg(fingerprint)::text AND o.id < sqlc.arg(cursor)::bigint
ORDER BY o.error_fingerprint, o.id DESC
LIMIT @max_rows;

-- name: ConsoleDeadLetterMessagesNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE o.state = 'dead' AND o.status = 'dead' AND o.error_fingerprint = sqlc.arg(fingerprint)::text AND o.id > sqlc.arg(cursor)::bigint
ORDER BY o.error_fingerprint, o.id
LIMIT @max_rows;

-- name: ConsoleBlockedAggregatesOlder :many
-- ConsoleBlockedAggregatesOlder lists the aggregates held by a dead head,
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

-- name: ConsoleBlockedAggregatesNewer :many
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
