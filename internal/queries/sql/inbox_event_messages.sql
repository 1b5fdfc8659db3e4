-- switchyard.inbox_event_messages: the outbox messages an inbound event's
-- handler enqueued.

-- name: InboxEventMessageLink :exec
-- InboxEventMessageLink links an event to the outbox messages its handler
-- has just enqueued in this transaction (internal/inbox collects their
-- message ids with outbox.RecordEnqueued), found by the unique index on
-- message_id. A message enqueued in a savepoint that was rolled back is
-- not there, and is not linked.
INSERT INTO switchyard.inbox_event_messages (inbox_event_id, outbox_id)
SELECT @inbox_event_id::bigint, o.id
FROM switchyard.outbox o
WHERE o.message_id = ANY(@message_ids::uuid[])
ON CONFLICT DO NOTHING;

-- name: InboxEventMessageList :many
SELECT o.id, o.topic, o.destination, o.state, o.attempts, o.created_at
FROM switchyard.inbox_event_messages m
JOIN switchyard.outbox o ON o.id = m.outbox_id
WHERE m.inbox_event_id = @inbox_event_id
ORDER BY o.id;

-- name: InboxEventMessageForward :one
-- InboxEventMessageForward is the forward handler's enqueue, in one round
-- trip where outbox.Enqueue and the link above take three: it inserts the
-- message only if its destination exists (no row: pgx.ErrNoRows, and
-- nothing written, so the transaction stays usable) and links it to event
-- inbox_event_id (0 links nothing). The outbox's insert trigger gives an
-- ordered message its place in its aggregate, as for any insert.
WITH destination AS (
    SELECT d.name FROM switchyard.destinations d WHERE d.name = @destination::text
), message AS (
    INSERT INTO switchyard.outbox (message_id, topic, destination, aggregate_type, aggregate_id, payload, headers, max_attempts)
    SELECT @message_id::uuid, @topic::text, d.name, @aggregate_type::text, @aggregate_id::text, @payload::json, @headers::json,
        sqlc.narg(max_attempts)::integer
    FROM destination d
    RETURNING id
), link AS (
    INSERT INTO switchyard.inbox_event_messages (inbox_event_id, outbox_id)
    SELECT @inbox_event_id::bigint, m.id
    FROM message m
    WHERE @inbox_event_id::bigint <> 0
)
SELECT id FROM message;
