-- Operator actions on dead messages: replay, discard, restore. See
-- migrations/00020_replays.sql and internal/outbox/replay.go. Each runs in
-- the caller's transaction, together with its audit row.

-- name: OutboxReplayByRequest :one
-- OutboxReplayByRequest finds the row a replay request already created.
SELECT id, coalesce(delivery_key, message_id)::uuid AS delivery_key, replay_of
FROM switchyard.outbox WHERE replay_request = @replay_request;

-- name: OutboxLockForAction :one
-- OutboxLockForAction locks a message for an operator action: replays and
-- discards of one message are applied one at a time.
SELECT o.id, o.message_id, coalesce(o.delivery_key, o.message_id)::uuid AS delivery_key, o.state,
    o.topic, o.destination, o.aggregate_type, o.aggregate_id, o.aggregate_seq, o.payload, o.headers,
    o.max_attempts, o.error_fingerprint, o.generation
FROM switchyard.outbox o
WHERE o.id = @id
FOR UPDATE OF o;

-- name: OutboxActionState :one
-- OutboxActionState says, once the message is locked (a statement of its
-- own, so that its snapshot sees what committed while waiting for the
-- lock), whether a replay of it is in flight and whether it is the dead
-- head its aggregate is blocked by.
SELECT
    EXISTS (SELECT 1 FROM switchyard.outbox r WHERE r.replay_of = @id::bigint AND r.state = 'pending') AS replay_pending,
    EXISTS (SELECT 1 FROM switchyard.outbox_blocked_aggregates b WHERE b.dead_message_id = @id::bigint) AS blocking;

-- name: OutboxReplayInsert :one
-- OutboxReplayInsert writes the replay: a new pending row. aggregate_seq is
-- the original's when it replaces its aggregate's dead head, else NULL (the
-- trigger numbers it after the aggregate's other messages).
INSERT INTO switchyard.outbox (
    topic, destination, aggregate_type, aggregate_id, aggregate_seq, payload, headers, max_attempts,
    replay_of, delivery_key, replay_request, replay_mode, replay_actor, replay_reason, generation
) VALUES (
    @topic, @destination, @aggregate_type, @aggregate_id, sqlc.narg(aggregate_seq), @payload, @headers, sqlc.narg(max_attempts),
    @replay_of, sqlc.narg(delivery_key), @replay_request, @replay_mode, @replay_actor, @replay_reason, @generation
)
RETURNING id, coalesce(delivery_key, message_id)::uuid AS delivery_key;

-- name: OutboxMarkReplayed :exec
-- OutboxMarkReplayed marks the original and takes it out of its dead-letter
-- group: it is handled; a replay that dies again is counted again.
WITH marked AS (
    UPDATE switchyard.outbox SET replayed_at = now(), replays = replays + 1
    WHERE id = @id
    RETURNING coalesce(error_fingerprint, '') AS fingerprint, replays
)
UPDATE switchyard.dead_letter_groups g SET dead = greatest(g.dead - 1, 0)
FROM marked m WHERE g.fingerprint = m.fingerprint AND m.replays = 1;

-- name: OutboxUnblockAggregate :exec
-- OutboxUnblockAggregate releases an aggregate blocked by a dead head that
-- was replayed or discarded: due at once, and done at most up to
-- done_at_most (for a replay that takes the head's place, just before it).
WITH unblocked AS (
    DELETE FROM switchyard.outbox_blocked_aggregates b
    WHERE b.destination = @destination::text AND b.aggregate_type = @aggregate_type::text AND b.aggregate_id = @aggregate_id::text
    RETURNING b.destination, b.aggregate_type, b.aggregate_id
)
UPDATE switchyard.outbox_aggregates a
SET due_at = now(),
    done_seq = least(a.done_seq, @done_at_most::bigint)
FROM unblocked u
WHERE a.destination = u.destination AND a.aggregate_type = u.aggregate_type AND a.aggregate_id = u.aggregate_id;

-- name: OutboxDiscard :exec
-- OutboxDiscard archives a dead message, out of its dead-letter group.
WITH discarded AS (
    UPDATE switchyard.outbox SET state = 'discarded'
    WHERE id = @id AND state = 'dead'
    RETURNING coalesce(error_fingerprint, '') AS fingerprint, replays
)
UPDATE switchyard.dead_letter_groups g SET dead = greatest(g.dead - 1, 0)
FROM discarded d WHERE g.fingerprint = d.fingerprint AND d.replays = 0;

-- name: OutboxRestore :one
-- OutboxRestore brings a discarded message back among the dead letters and
-- says how many it restored (0 or 1). It does not block its aggregate
-- again: the messages after it may have been delivered meanwhile.
WITH restored AS (
    UPDATE switchyard.outbox SET state = 'dead'
    WHERE id = @id AND state = 'discarded'
    RETURNING coalesce(error_fingerprint, '') AS fingerprint, replays
),
counted AS (
    UPDATE switchyard.dead_letter_groups g SET dead = g.dead + 1
    FROM restored r WHERE g.fingerprint = r.fingerprint AND r.replays = 0
)
SELECT count(*) FROM restored;
