-- switchyard.console_messages (the view that defines every message state
-- once): the message browser (internal/console/messages_list.go) and the
-- message page. Every list is a keyset page in id order over one index:
-- Older pages go down from a cursor (newest first), Newer pages go up.
--
-- Every list takes the same filters. stage narrows to the pending messages
-- in one stage as the dashboard counts them (StatsPendingFlowList): queued
-- (not leased, never attempted), in_flight (leased), retrying (not leased,
-- attempted). An unordered first try is leased in a stretch
-- (OutboxClaimUnordered: one row, switchyard.outbox_stretches, for a
-- claim's messages of a destination, theirs not written): its id in one,
-- read through one hash of the stretches' ids per statement. An ordered
-- message is leased while it heads its aggregate under a dispatcher's
-- lease; the messages behind it in the same delivery are not written by
-- the claim (OutboxClaimOrdered) and count as queued until their finalize.
-- lease_owner_pattern to the pending messages whose lease (or stretch)
-- holder matches it (a dispatcher's workers: internal/console,
-- leaseOwnerPattern). No index holds the lease
-- (migrations/00020_console_leases.sql): they are served by
-- outbox_pending_id within a window of the backlog
-- (ConsoleMessagePendingIDBelow/Above).

-- name: ConsoleMessageGet :one
SELECT * FROM switchyard.outbox WHERE id = @id;

-- name: ConsoleMessageStretchGet :one
-- ConsoleMessageStretchGet is the stretch that leases a first try in
-- flight (OutboxClaimUnordered: its own row holds no lease), if one does:
-- its holder and its lease's expiry. The stretches are as many as the
-- claims in flight.
SELECT s.owner, s.leased_until FROM switchyard.outbox_stretches s WHERE @id::bigint = ANY (s.ids) LIMIT 1;

-- name: ConsoleMessageIDGetByMessageID :one
-- ConsoleMessageIDGetByMessageID resolves a deep link by message id, which is
-- also the idempotency key every delivery carries.
SELECT id FROM switchyard.outbox WHERE message_id = @message_id;

-- name: ConsoleMessagePayloadGet :one
SELECT payload::text FROM switchyard.outbox WHERE id = @id;

-- name: ConsoleMessageAttemptList :many
SELECT * FROM switchyard.outbox_attempt_log
WHERE message_id = @message_id
ORDER BY finished_at, attempt
LIMIT @max_rows;

-- name: ConsoleMessageReplayList :many
-- ConsoleMessageReplayList lists the replays of a message (outbox_replay_of).
SELECT o.* FROM switchyard.console_messages o
WHERE o.replay_of = @id
ORDER BY o.id
LIMIT @max_rows;

-- name: ConsoleMessageStatusGet :one
-- ConsoleMessageStatusGet is a message's console state and, once replayed,
-- its newest replay's state: the definition in switchyard.console_messages,
-- which every list and filter uses too.
SELECT o.status, o.replay_outcome
FROM switchyard.console_messages o WHERE o.id = @id;

-- name: ConsoleMessagesListOlder :many
-- ConsoleMessagesListOlder walks the primary key.
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id < @cursor::bigint
ORDER BY o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesListNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id > @cursor::bigint
ORDER BY o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesListPendingOlder :many
-- ConsoleMessagesListPendingOlder walks outbox_pending_id.
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id < @cursor::bigint
    AND o.state = 'pending'
ORDER BY o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesListPendingNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id > @cursor::bigint
    AND o.state = 'pending'
ORDER BY o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesListDeadOlder :many
-- ConsoleMessagesListDeadOlder walks outbox_dead_id: the dead and the
-- replayed (dead, then replayed), told apart by status (the view).
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id < @cursor::bigint
    AND o.state = 'dead'
ORDER BY o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesListDeadNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id > @cursor::bigint
    AND o.state = 'dead'
ORDER BY o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesListDeliveredOlder :many
-- ConsoleMessagesListDeliveredOlder lists delivered messages, the latest
-- delivery first, on outbox_finished_id (finished_at, id): the index that
-- retention and the reconciler walk too (migrations/00032_outbox_finished_id.sql);
-- the primary key would read every message not delivered above the page
-- first, a whole backlog. The cursor stays a message id: the page below
-- it is below that message's delivery, read here. A cursor that is not
-- a delivered message (pruned since) reads from the top.
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND (o.finished_at, o.id) < (coalesce((SELECT c.finished_at FROM switchyard.outbox c
        WHERE c.id = @cursor::bigint AND c.state = 'delivered'), 'infinity'), @cursor::bigint)
    AND o.state = 'delivered'
ORDER BY o.finished_at DESC, o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesListDeliveredNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND (o.finished_at, o.id) > (coalesce((SELECT c.finished_at FROM switchyard.outbox c
        WHERE c.id = @cursor::bigint AND c.state = 'delivered'), 'infinity'), @cursor::bigint)
    AND o.state = 'delivered'
ORDER BY o.finished_at ASC, o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesListDiscardedOlder :many
-- ConsoleMessagesListDiscardedOlder walks outbox_discarded_id.
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id < @cursor::bigint
    AND o.state = 'discarded'
ORDER BY o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesListDiscardedNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id > @cursor::bigint
    AND o.state = 'discarded'
ORDER BY o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesListFailedOlder :many
-- ConsoleMessagesListFailedOlder walks outbox_failed_id (error text searches).
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id < @cursor::bigint
    AND o.last_error IS NOT NULL
ORDER BY o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesListFailedNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id > @cursor::bigint
    AND o.last_error IS NOT NULL
ORDER BY o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesListTopicOlder :many
-- ConsoleMessagesListTopicOlder walks outbox_topic_id (messages not delivered).
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id < @cursor::bigint
    AND o.topic = sqlc.narg(topic)::text
    AND o.state <> 'delivered' -- the partial index's predicate
ORDER BY o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesListTopicNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id > @cursor::bigint
    AND o.topic = sqlc.narg(topic)::text
    AND o.state <> 'delivered' -- the partial index's predicate
ORDER BY o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesListDestinationOlder :many
-- ConsoleMessagesListDestinationOlder walks outbox_destination_id (messages not
-- delivered).
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id < @cursor::bigint
    AND o.destination = sqlc.narg(destination)::text
    AND o.state <> 'delivered' -- the partial index's predicate
ORDER BY o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesListDestinationNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id > @cursor::bigint
    AND o.destination = sqlc.narg(destination)::text
    AND o.state <> 'delivered' -- the partial index's predicate
ORDER BY o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesListAggregateOlder :many
-- ConsoleMessagesListAggregateOlder walks the aggregate's messages in
-- outbox_aggregate_messages (migration 00028), each then read by its id.
SELECT o.* FROM switchyard.outbox_aggregate_messages m
JOIN switchyard.console_messages o ON o.id = m.message_id
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND m.message_id >= @floor::bigint AND m.message_id <= @ceiling::bigint
    AND m.message_id < @cursor::bigint
    AND m.aggregate_type = sqlc.narg(aggregate_type)::text AND m.aggregate_id = sqlc.narg(aggregate_id)::text
ORDER BY m.message_id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesListAggregateNewer :many
-- ConsoleMessagesListAggregateNewer: as ConsoleMessagesListAggregateOlder.
SELECT o.* FROM switchyard.outbox_aggregate_messages m
JOIN switchyard.console_messages o ON o.id = m.message_id
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND m.message_id >= @floor::bigint AND m.message_id <= @ceiling::bigint
    AND m.message_id > @cursor::bigint
    AND m.aggregate_type = sqlc.narg(aggregate_type)::text AND m.aggregate_id = sqlc.narg(aggregate_id)::text
ORDER BY m.message_id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesListTopicPrefixOlder :many
-- ConsoleMessagesListTopicPrefixOlder serves a topic prefix among messages
-- not delivered on outbox_topic_id (text_pattern_ops): it finds the
-- distinct topics in the prefix's range one index probe each (a loose
-- index scan), takes each one's page below the cursor from the same index
-- in id order, and merges them: a page reads max_rows entries of each
-- topic with matches, and every entry of one without. Each topic's walk
-- is fenced (OFFSET 0) from the other filters: with them the planner,
-- misjudging their selectivity, picked a bitmap scan and sort of every
-- entry of the topic (16 s at 1,000,000 rows) or the dead index filtered
-- by topic (49 s) over the ordered walk (about 20 ms; EXPLAIN.md).
WITH RECURSIVE matching (topic) AS (
    (SELECT t.topic FROM switchyard.outbox t
     WHERE t.topic ~>=~ sqlc.narg(topic_prefix)::text AND t.topic ~<~ sqlc.narg(topic_upper)::text
         AND t.state <> 'delivered'
     ORDER BY t.topic USING ~<~ LIMIT 1)
    UNION ALL
    SELECT (SELECT t.topic FROM switchyard.outbox t
            WHERE t.topic ~>~ s.topic AND t.topic ~<~ sqlc.narg(topic_upper)::text
                AND t.state <> 'delivered'
            ORDER BY t.topic USING ~<~ LIMIT 1)
    FROM matching s WHERE s.topic IS NOT NULL
)
SELECT r.* FROM switchyard.console_messages r
WHERE r.id IN (
    SELECT m.id FROM matching s CROSS JOIN LATERAL (
        SELECT o.id FROM (
            SELECT o.id, o.topic, o.destination, o.aggregate_type, o.aggregate_id, o.state, o.status,
                o.last_error, o.created_at, o.lease_owner, o.attempts
            FROM switchyard.console_messages o
            WHERE o.topic = s.topic
                AND o.state <> 'delivered' -- the partial index's predicate
                AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
                AND o.id < @cursor::bigint
            ORDER BY o.id DESC
            OFFSET 0 -- a fence: the filters stay outside, so the planner walks the index in id order
        ) AS o
        WHERE true
            AND (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
            AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
            AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
            AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
            AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
            AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
            AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
            AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
            AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
            AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
            AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
                WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
                WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
            AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
        ORDER BY o.id DESC
        LIMIT @max_rows
    ) AS m
    WHERE s.topic IS NOT NULL
)
ORDER BY r.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesListTopicPrefixNewer :many
WITH RECURSIVE matching (topic) AS (
    (SELECT t.topic FROM switchyard.outbox t
     WHERE t.topic ~>=~ sqlc.narg(topic_prefix)::text AND t.topic ~<~ sqlc.narg(topic_upper)::text
         AND t.state <> 'delivered'
     ORDER BY t.topic USING ~<~ LIMIT 1)
    UNION ALL
    SELECT (SELECT t.topic FROM switchyard.outbox t
            WHERE t.topic ~>~ s.topic AND t.topic ~<~ sqlc.narg(topic_upper)::text
                AND t.state <> 'delivered'
            ORDER BY t.topic USING ~<~ LIMIT 1)
    FROM matching s WHERE s.topic IS NOT NULL
)
SELECT r.* FROM switchyard.console_messages r
WHERE r.id IN (
    SELECT m.id FROM matching s CROSS JOIN LATERAL (
        SELECT o.id FROM (
            SELECT o.id, o.topic, o.destination, o.aggregate_type, o.aggregate_id, o.state, o.status,
                o.last_error, o.created_at, o.lease_owner, o.attempts
            FROM switchyard.console_messages o
            WHERE o.topic = s.topic
                AND o.state <> 'delivered' -- the partial index's predicate
                AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
                AND o.id > @cursor::bigint
            ORDER BY o.id ASC
            OFFSET 0 -- a fence: the filters stay outside, so the planner walks the index in id order
        ) AS o
        WHERE true
            AND (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
            AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
            AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
            AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
            AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
            AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
            AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
            AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
            AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
            AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
            AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
                WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
                WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
            AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
        ORDER BY o.id ASC
        LIMIT @max_rows
    ) AS m
    WHERE s.topic IS NOT NULL
)
ORDER BY r.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesListDeadTopicPrefixOlder :many
-- ConsoleMessagesListDeadTopicPrefixOlder is ConsoleMessagesListTopicPrefixOlder
-- for the dead letters (state dead or replayed: both are stored as dead),
-- on outbox_dead_topic_id (migration 00025): the loose index scan finds
-- only the topics in the prefix's range that have dead letters, and each
-- walk reads dead letters only. On outbox_topic_id a topic without dead
-- letters cost a walk of all its undelivered entries (its backlog): 100 ms
-- for `order.*` at 10,000,000 rows. Its filters are those of every list
-- query here: keep them in step.
WITH RECURSIVE matching (topic) AS (
    (SELECT t.topic FROM switchyard.outbox t
     WHERE t.topic ~>=~ sqlc.narg(topic_prefix)::text AND t.topic ~<~ sqlc.narg(topic_upper)::text
         AND t.state = 'dead'
     ORDER BY t.topic USING ~<~ LIMIT 1)
    UNION ALL
    SELECT (SELECT t.topic FROM switchyard.outbox t
            WHERE t.topic ~>~ s.topic AND t.topic ~<~ sqlc.narg(topic_upper)::text
                AND t.state = 'dead'
            ORDER BY t.topic USING ~<~ LIMIT 1)
    FROM matching s WHERE s.topic IS NOT NULL
)
SELECT r.* FROM switchyard.console_messages r
WHERE r.id IN (
    SELECT m.id FROM matching s CROSS JOIN LATERAL (
        SELECT o.id FROM (
            -- Only the index's columns: an index-only walk, which the
            -- planner prefers to outbox_dead_id filtered by topic (that
            -- one reads every dead letter of the other topics).
            SELECT d.id FROM switchyard.outbox d
            WHERE d.topic = s.topic
                AND d.state = 'dead' -- the partial index's predicate
                AND d.id >= @floor::bigint AND d.id <= @ceiling::bigint
                AND d.id < @cursor::bigint
            ORDER BY d.id DESC
            OFFSET 0 -- a fence, as in ConsoleMessagesListTopicPrefixOlder
        ) AS w
        JOIN switchyard.console_messages o ON o.id = w.id
        WHERE true
            AND (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
            AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
            AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
            AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
            AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
            AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
            AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
            AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
            AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
            AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
            AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
                WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
                WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
            AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
        ORDER BY o.id DESC
        LIMIT @max_rows
    ) AS m
    WHERE s.topic IS NOT NULL
)
ORDER BY r.id DESC
LIMIT @max_rows;


-- name: ConsoleMessagesListDeadTopicPrefixNewer :many
WITH RECURSIVE matching (topic) AS (
    (SELECT t.topic FROM switchyard.outbox t
     WHERE t.topic ~>=~ sqlc.narg(topic_prefix)::text AND t.topic ~<~ sqlc.narg(topic_upper)::text
         AND t.state = 'dead'
     ORDER BY t.topic USING ~<~ LIMIT 1)
    UNION ALL
    SELECT (SELECT t.topic FROM switchyard.outbox t
            WHERE t.topic ~>~ s.topic AND t.topic ~<~ sqlc.narg(topic_upper)::text
                AND t.state = 'dead'
            ORDER BY t.topic USING ~<~ LIMIT 1)
    FROM matching s WHERE s.topic IS NOT NULL
)
SELECT r.* FROM switchyard.console_messages r
WHERE r.id IN (
    SELECT m.id FROM matching s CROSS JOIN LATERAL (
        SELECT o.id FROM (
            -- Only the index's columns: an index-only walk, which the
            -- planner prefers to outbox_dead_id filtered by topic (that
            -- one reads every dead letter of the other topics).
            SELECT d.id FROM switchyard.outbox d
            WHERE d.topic = s.topic
                AND d.state = 'dead' -- the partial index's predicate
                AND d.id >= @floor::bigint AND d.id <= @ceiling::bigint
                AND d.id > @cursor::bigint
            ORDER BY d.id ASC
            OFFSET 0 -- a fence, as in ConsoleMessagesListTopicPrefixNewer
        ) AS w
        JOIN switchyard.console_messages o ON o.id = w.id
        WHERE true
            AND (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
            AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
            AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
            AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
            AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
            AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
            AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
            AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
            AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
            AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
            AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
                WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
                WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
            AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
        ORDER BY o.id ASC
        LIMIT @max_rows
    ) AS m
    WHERE s.topic IS NOT NULL
)
ORDER BY r.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesListDeadDestinationPrefixOlder :many
-- ConsoleMessagesListDeadDestinationPrefixOlder is
-- ConsoleMessagesListDeadTopicPrefixOlder for destinations, on
-- outbox_dead_destination_id (migration 00026): on outbox_destination_id
-- each destination's walk read its backlog before its dead letters, and
-- the planner, expecting a few hundred of them, read all 52,000 of one
-- destination and sorted them (160 ms a page at 1,000,000 rows). Its
-- filters are those of every list query here: keep them in step.
WITH RECURSIVE matching (destination) AS (
    (SELECT t.destination FROM switchyard.outbox t
     WHERE t.destination ~>=~ sqlc.narg(destination_prefix)::text AND t.destination ~<~ sqlc.narg(destination_upper)::text
         AND t.state = 'dead'
     ORDER BY t.destination USING ~<~ LIMIT 1)
    UNION ALL
    SELECT (SELECT t.destination FROM switchyard.outbox t
            WHERE t.destination ~>~ s.destination AND t.destination ~<~ sqlc.narg(destination_upper)::text
                AND t.state = 'dead'
            ORDER BY t.destination USING ~<~ LIMIT 1)
    FROM matching s WHERE s.destination IS NOT NULL
)
SELECT r.* FROM switchyard.console_messages r
WHERE r.id IN (
    SELECT m.id FROM matching s CROSS JOIN LATERAL (
        SELECT o.id FROM (
            -- Only the index's columns: an index-only walk, which the
            -- planner prefers to outbox_dead_id filtered by destination
            -- (that one reads every dead letter of the others).
            SELECT d.id FROM switchyard.outbox d
            WHERE d.destination = s.destination
                AND d.state = 'dead' -- the partial index's predicate
                AND d.id >= @floor::bigint AND d.id <= @ceiling::bigint
                AND d.id < @cursor::bigint
            ORDER BY d.id DESC
            OFFSET 0 -- a fence, as in ConsoleMessagesListTopicPrefixOlder
        ) AS w
        JOIN switchyard.console_messages o ON o.id = w.id
        WHERE true
            AND (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
            AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
            AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
            AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
            AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
            AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
            AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
            AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
            AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
            AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
            AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
                WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
                WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
            AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
        ORDER BY o.id DESC
        LIMIT @max_rows
    ) AS m
    WHERE s.destination IS NOT NULL
)
ORDER BY r.id DESC
LIMIT @max_rows;


-- name: ConsoleMessagesListDeadDestinationPrefixNewer :many
WITH RECURSIVE matching (destination) AS (
    (SELECT t.destination FROM switchyard.outbox t
     WHERE t.destination ~>=~ sqlc.narg(destination_prefix)::text AND t.destination ~<~ sqlc.narg(destination_upper)::text
         AND t.state = 'dead'
     ORDER BY t.destination USING ~<~ LIMIT 1)
    UNION ALL
    SELECT (SELECT t.destination FROM switchyard.outbox t
            WHERE t.destination ~>~ s.destination AND t.destination ~<~ sqlc.narg(destination_upper)::text
                AND t.state = 'dead'
            ORDER BY t.destination USING ~<~ LIMIT 1)
    FROM matching s WHERE s.destination IS NOT NULL
)
SELECT r.* FROM switchyard.console_messages r
WHERE r.id IN (
    SELECT m.id FROM matching s CROSS JOIN LATERAL (
        SELECT o.id FROM (
            -- Only the index's columns: an index-only walk, which the
            -- planner prefers to outbox_dead_id filtered by destination
            -- (that one reads every dead letter of the others).
            SELECT d.id FROM switchyard.outbox d
            WHERE d.destination = s.destination
                AND d.state = 'dead' -- the partial index's predicate
                AND d.id >= @floor::bigint AND d.id <= @ceiling::bigint
                AND d.id > @cursor::bigint
            ORDER BY d.id ASC
            OFFSET 0 -- a fence, as in ConsoleMessagesListTopicPrefixNewer
        ) AS w
        JOIN switchyard.console_messages o ON o.id = w.id
        WHERE true
            AND (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
            AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
            AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
            AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
            AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
            AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
            AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
            AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
            AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
            AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
            AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
                WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
                WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
            AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
        ORDER BY o.id ASC
        LIMIT @max_rows
    ) AS m
    WHERE s.destination IS NOT NULL
)
ORDER BY r.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesListDestinationPrefixOlder :many
-- ConsoleMessagesListDestinationPrefixOlder is ConsoleMessagesListTopicPrefixOlder
-- for destinations, on outbox_destination_id.
WITH RECURSIVE matching (destination) AS (
    (SELECT t.destination FROM switchyard.outbox t
     WHERE t.destination ~>=~ sqlc.narg(destination_prefix)::text AND t.destination ~<~ sqlc.narg(destination_upper)::text
         AND t.state <> 'delivered'
     ORDER BY t.destination USING ~<~ LIMIT 1)
    UNION ALL
    SELECT (SELECT t.destination FROM switchyard.outbox t
            WHERE t.destination ~>~ s.destination AND t.destination ~<~ sqlc.narg(destination_upper)::text
                AND t.state <> 'delivered'
            ORDER BY t.destination USING ~<~ LIMIT 1)
    FROM matching s WHERE s.destination IS NOT NULL
)
SELECT r.* FROM switchyard.console_messages r
WHERE r.id IN (
    SELECT m.id FROM matching s CROSS JOIN LATERAL (
        SELECT o.id FROM (
            SELECT o.id, o.topic, o.destination, o.aggregate_type, o.aggregate_id, o.state, o.status,
                o.last_error, o.created_at, o.lease_owner, o.attempts
            FROM switchyard.console_messages o
            WHERE o.destination = s.destination
                AND o.state <> 'delivered' -- the partial index's predicate
                AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
                AND o.id < @cursor::bigint
            ORDER BY o.id DESC
            OFFSET 0 -- a fence: the filters stay outside, so the planner walks the index in id order
        ) AS o
        WHERE true
            AND (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
            AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
            AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
            AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
            AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
            AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
            AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
            AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
            AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
            AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
            AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
                WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
                WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
            AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
        ORDER BY o.id DESC
        LIMIT @max_rows
    ) AS m
    WHERE s.destination IS NOT NULL
)
ORDER BY r.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesListDestinationPrefixNewer :many
WITH RECURSIVE matching (destination) AS (
    (SELECT t.destination FROM switchyard.outbox t
     WHERE t.destination ~>=~ sqlc.narg(destination_prefix)::text AND t.destination ~<~ sqlc.narg(destination_upper)::text
         AND t.state <> 'delivered'
     ORDER BY t.destination USING ~<~ LIMIT 1)
    UNION ALL
    SELECT (SELECT t.destination FROM switchyard.outbox t
            WHERE t.destination ~>~ s.destination AND t.destination ~<~ sqlc.narg(destination_upper)::text
                AND t.state <> 'delivered'
            ORDER BY t.destination USING ~<~ LIMIT 1)
    FROM matching s WHERE s.destination IS NOT NULL
)
SELECT r.* FROM switchyard.console_messages r
WHERE r.id IN (
    SELECT m.id FROM matching s CROSS JOIN LATERAL (
        SELECT o.id FROM (
            SELECT o.id, o.topic, o.destination, o.aggregate_type, o.aggregate_id, o.state, o.status,
                o.last_error, o.created_at, o.lease_owner, o.attempts
            FROM switchyard.console_messages o
            WHERE o.destination = s.destination
                AND o.state <> 'delivered' -- the partial index's predicate
                AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
                AND o.id > @cursor::bigint
            ORDER BY o.id ASC
            OFFSET 0 -- a fence: the filters stay outside, so the planner walks the index in id order
        ) AS o
        WHERE true
            AND (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
            AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
            AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
            AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
            AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
            AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
            AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
            AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
            AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
            AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
            AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
                WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
                WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
            AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
        ORDER BY o.id ASC
        LIMIT @max_rows
    ) AS m
    WHERE s.destination IS NOT NULL
)
ORDER BY r.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesEstimate :one
-- ConsoleMessagesEstimate is the planner's estimate of the messages that
-- match the filters (migrations/00017_console_prefix_indexes.sql, 00020, 00021):
-- the list's "about N".
SELECT switchyard.console_messages_estimate(
    sqlc.narg(state)::text, sqlc.narg(topic)::text, sqlc.narg(topic_prefix)::text,
    sqlc.narg(destination)::text, sqlc.narg(destination_prefix)::text,
    sqlc.narg(aggregate_type)::text, sqlc.narg(aggregate_id)::text, sqlc.narg(error_text)::text,
    sqlc.narg(created_from)::timestamptz, sqlc.narg(created_to)::timestamptz,
    sqlc.narg(stage)::text, sqlc.narg(lease_owner_pattern)::text)::bigint AS estimate;

-- name: ConsoleMessagePendingIDBelow :one
-- ConsoleMessagePendingIDBelow is the id of the pending message skip places
-- below cursor, newest first: one walk of outbox_pending_id's keys. It
-- bounds a list that a stage or lease holder serves from that index to a
-- window of the backlog (internal/console/messages_list.go).
SELECT o.id FROM switchyard.outbox o
WHERE o.state = 'pending' AND o.id < @cursor::bigint
ORDER BY o.id DESC
OFFSET @skip::int LIMIT 1;

-- name: ConsoleMessagePendingIDAbove :one
-- ConsoleMessagePendingIDAbove is ConsoleMessagePendingIDBelow going up.
SELECT o.id FROM switchyard.outbox o
WHERE o.state = 'pending' AND o.id > @cursor::bigint
ORDER BY o.id
OFFSET @skip::int LIMIT 1;

-- name: ConsoleMessagesCountNew :one
-- ConsoleMessagesCountNew counts, up to 100, the messages matching the
-- filters above the first row shown (cursor); the caller caps ceiling a
-- few thousand ids ahead: the "N new" control needs a small number
-- cheaply, never a total.
SELECT count(*) FROM (
    SELECT 1 FROM switchyard.console_messages o
    WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(topic_prefix)::text IS NULL OR (o.topic ~>=~ sqlc.narg(topic_prefix)::text AND o.topic ~<~ sqlc.narg(topic_upper)::text))
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(destination_prefix)::text IS NULL OR (o.destination ~>=~ sqlc.narg(destination_prefix)::text AND o.destination ~<~ sqlc.narg(destination_upper)::text))
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND (sqlc.narg(stage)::text IS NULL OR (o.state = 'pending' AND CASE sqlc.narg(stage)::text
        WHEN 'queued' THEN o.lease_owner IS NULL AND o.attempts = 0 AND o.id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)
        WHEN 'in_flight' THEN o.lease_owner IS NOT NULL OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s))
        WHEN 'retrying' THEN o.lease_owner IS NULL AND o.attempts > 0 ELSE false END))
    AND (sqlc.narg(lease_owner_pattern)::text IS NULL OR (o.state = 'pending' AND (o.lease_owner ~ sqlc.narg(lease_owner_pattern)::text
        OR (o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner ~ sqlc.narg(lease_owner_pattern)::text)))))
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
        AND o.id > @cursor::bigint
    LIMIT 100
) AS s;

-- name: ConsoleMessagesCountNewDelivered :one
-- ConsoleMessagesCountNewDelivered is ConsoleMessagesCountNew for the
-- delivered list, which is in delivery order: up to 100 messages delivered
-- after the first row shown (cursor), on outbox_finished_id. No first row
-- (cursor 0) or one pruned since: every delivery counts.
SELECT count(*) FROM (
    SELECT 1 FROM switchyard.outbox o
    WHERE o.state = 'delivered'
        AND (o.finished_at, o.id) > (coalesce((SELECT c.finished_at FROM switchyard.outbox c
            WHERE c.id = @cursor::bigint AND c.state = 'delivered'), '-infinity'), @cursor::bigint)
    LIMIT 100
) AS s;

-- name: ConsoleMessageIDBoundsGet :one
SELECT coalesce(min(id), 0)::bigint AS low, coalesce(max(id), 0)::bigint AS high FROM switchyard.outbox;

-- name: ConsoleMessageGetAtOrAfter :one
-- ConsoleMessageGetAtOrAfter is one probe of the search that maps a time to
-- an id: the first message at or above an id (primary key).
SELECT id, created_at FROM switchyard.outbox WHERE id >= @id ORDER BY id LIMIT 1;
