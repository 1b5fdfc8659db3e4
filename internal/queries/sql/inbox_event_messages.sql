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

-- name: InboxEventForwardOnce :one
-- InboxEventForwardOnce receives an event of a forward source (one without
-- an entity version) in one statement, run on its own (its implicit
-- transaction is the event's): InboxEventClaim and InboxEventMessageForward
-- above, fused, where the general path takes three round trips (the claim
-- with its BEGIN, the forward, the COMMIT). Nothing is written when the
-- destination does not exist (destination_known false: the general path
-- then says whether the event is a duplicate or what to answer). Else
-- event_row is the recorded event's id, its message enqueued and linked
-- to it; or 0 for a duplicate, counted as InboxEventClaim counts one.
WITH destination AS (
    SELECT d.name FROM switchyard.destinations d WHERE d.name = @destination::text
), claimed AS (
    INSERT INTO switchyard.inbox_events (source, event_id, headers, payload, entity_key, status, processed_at)
    SELECT @source::text, @event_id::text, @event_headers::json, @event_payload::json, '', 'processed', now()
    FROM destination
    ON CONFLICT (source, event_id) DO UPDATE SET status = 'processed', processed_at = now()
        WHERE inbox_events.status = 'failed'
    RETURNING id
), duplicate AS (
    INSERT INTO switchyard.inbox_duplicates AS d (source, slot, count)
    SELECT @source::text, @slot::smallint, 1 FROM destination WHERE NOT EXISTS (SELECT 1 FROM claimed)
    ON CONFLICT (source, slot) DO UPDATE SET count = d.count + 1, updated_at = now()
), duplicate_delivery AS (
    INSERT INTO switchyard.inbox_event_duplicates (source, event_id)
    SELECT @source::text, @event_id::text FROM destination WHERE NOT EXISTS (SELECT 1 FROM claimed)
), message AS (
    INSERT INTO switchyard.outbox (message_id, topic, destination, aggregate_type, aggregate_id, payload, headers, max_attempts)
    SELECT @message_id::uuid, @topic::text, d.name, @aggregate_type::text, @aggregate_id::text, @payload::json, @headers::json,
        sqlc.narg(max_attempts)::integer
    FROM destination d, claimed
    RETURNING id
), link AS (
    INSERT INTO switchyard.inbox_event_messages (inbox_event_id, outbox_id)
    SELECT c.id, m.id FROM claimed c, message m
)
SELECT EXISTS (SELECT 1 FROM destination) AS destination_known, coalesce((SELECT id FROM claimed), 0)::bigint AS event_row;
