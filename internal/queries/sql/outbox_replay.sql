-- Operator actions on dead messages: replay, discard, restore. See
-- migrations/00020_replays.sql and internal/outbox/replay.go. Each runs in
-- the caller's transaction, together with its audit row.

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

-- name: OutboxReplayLock :exec
-- OutboxReplayLock locks the originals of a batch of replays (one, for a
-- single replay) in id order, as every replay does, so that two batches,
-- or a batch and a single replay, cannot deadlock on them. A statement of its own: the next one's snapshot
-- sees what committed while it waited.
SELECT 1 FROM switchyard.outbox o
WHERE o.id = ANY(@ids::bigint[])
ORDER BY o.id
FOR UPDATE OF o;

-- name: OutboxReplayLockAggregates :exec
-- OutboxReplayLockAggregates locks the aggregates of a batch's originals in
-- key order before the replays number themselves there (the enqueue
-- trigger) and unblock them (OutboxUnblockHeads): without it, a batch would
-- lock them in insert order and then in unblock order, and two batches
-- could deadlock. The dispatcher's claims skip locked aggregates, so they
-- never wait for it.
SELECT 1 FROM switchyard.outbox_aggregates a
WHERE (a.destination, a.aggregate_type, a.aggregate_id) IN (
    SELECT o.destination, o.aggregate_type, o.aggregate_id FROM switchyard.outbox o
    WHERE o.id = ANY(@ids::bigint[]) AND o.aggregate_id <> '')
ORDER BY a.destination, a.aggregate_type, a.aggregate_id
FOR UPDATE OF a;

-- name: OutboxReplayApply :many
-- OutboxReplayApply replays a batch of locked originals (OutboxReplayLock)
-- in one statement, ids[n] with request request_ids[n], and says per
-- original what happened (status):
--
--   replayed        a new pending row, replay_id, was written: the
--                   original's copy (or the edited payload), pointing to it,
--                   with the original's idempotency key (redeliver) or a new
--                   one (reapply), one generation later; the original is
--                   marked replayed and, at its first replay, leaves its
--                   dead-letter group;
--   existing        this request had already replayed this original
--                   (replay_id): nothing new;
--   request_reused  this request id had replayed another message;
--   not_found, not_dead, in_flight (a replay of it is still pending)
--                   refused, nothing written.
--
-- A replay of its aggregate's blocking dead head (blocking) takes the
-- head's aggregate_seq; the caller then unblocks the aggregate with
-- OutboxUnblockHeads (not here: the enqueue trigger updates the same
-- aggregate rows, and a statement cannot update a row twice). Other
-- replays are numbered after their aggregate's messages by the trigger, in
-- (aggregate, id) order, as one-by-one replays in id order would be.
-- Dead-letter groups are locked in fingerprint order, as the dispatcher's
-- finalize locks them, so the two cannot deadlock.
WITH input AS (
    -- Parallel arrays, assembled by subscript (sqlc cannot type a
    -- multi-argument unnest).
    SELECT (@ids::bigint[])[n] AS id, (@request_ids::uuid[])[n] AS request_id
    FROM generate_series(1, cardinality(@ids::bigint[])) AS n
),
classified AS (
    SELECT i.id, i.request_id, o.topic, o.destination, o.aggregate_type, o.aggregate_id, o.aggregate_seq,
        o.payload, o.headers, o.max_attempts, o.generation, o.replays,
        coalesce(o.error_fingerprint, '') AS fingerprint, coalesce(o.delivery_key, o.message_id) AS delivery_key,
        prev.id AS prev_id, prev.delivery_key AS prev_key,
        (o.aggregate_seq IS NOT NULL AND b.blocking IS NOT NULL) AS blocking,
        CASE
            WHEN o.id IS NULL THEN 'not_found'
            WHEN prev.id IS NOT NULL AND prev.replay_of IS DISTINCT FROM o.id THEN 'request_reused'
            WHEN prev.id IS NOT NULL THEN 'existing'
            WHEN o.state <> 'dead' THEN 'not_dead'
            WHEN r.pending THEN 'in_flight'
            ELSE 'replayed'
        END AS status,
        o.state
    FROM input i
    LEFT JOIN switchyard.outbox o ON o.id = i.id
    -- Probes per message (LATERAL) through the indexes on replay_request,
    -- replay_of and dead_message_id, so a batch costs the same however big
    -- the outbox. Seen otherwise, with statistics from before a big job: a
    -- merge join reading all of outbox_replay_request, an EXISTS planned
    -- as a hashed subplan reading every pending message, and a probe with
    -- "state = 'pending'" walking outbox_pending_id (all pending
    -- messages): every batch slower than the last. A message's replays are
    -- few: read them all, then look.
    LEFT JOIN LATERAL (
        SELECT p.id, p.replay_of, coalesce(p.delivery_key, p.message_id) AS delivery_key
        FROM switchyard.outbox p WHERE p.replay_request = i.request_id
        LIMIT 1 -- unique; the LIMIT keeps the planner from flattening the probe into a join
    ) prev ON true
    LEFT JOIN LATERAL (
        SELECT bool_or(r.state = 'pending') AS pending FROM switchyard.outbox r WHERE r.replay_of = o.id
    ) r ON true
    LEFT JOIN LATERAL (
        SELECT true AS blocking FROM switchyard.outbox_blocked_aggregates b WHERE b.dead_message_id = o.id LIMIT 1
    ) b ON true
),
inserted AS (
    INSERT INTO switchyard.outbox (
        topic, destination, aggregate_type, aggregate_id, aggregate_seq, payload, headers, max_attempts,
        replay_of, delivery_key, replay_request, replay_mode, replay_actor, replay_reason, generation, replay_job
    )
    SELECT c.topic, c.destination, c.aggregate_type, c.aggregate_id, CASE WHEN c.blocking THEN c.aggregate_seq END,
        coalesce(sqlc.narg(payload)::jsonb, c.payload), c.headers, c.max_attempts,
        c.id, CASE WHEN @mode::text = 'redeliver' THEN c.delivery_key END, c.request_id,
        @mode::text, @actor::text, @reason::text, c.generation + 1, sqlc.narg(job)::uuid
    FROM classified c
    WHERE c.status = 'replayed'
    ORDER BY c.destination, c.aggregate_type, c.aggregate_id, c.id
    -- Unreachable under the originals' locks (the status says so first);
    -- the unique index is the backstop of invariant 6.
    ON CONFLICT (replay_request) WHERE replay_request IS NOT NULL DO NOTHING
    RETURNING id, replay_of, coalesce(delivery_key, message_id) AS delivery_key
),
marked AS (
    UPDATE switchyard.outbox o SET replayed_at = now(), replays = o.replays + 1
    FROM inserted r WHERE o.id = r.replay_of
),
-- A message leaves its dead-letter group at its first replay; a replay
-- that dies again is counted again.
left_groups AS (
    SELECT c.fingerprint, count(*) AS replayed
    FROM classified c JOIN inserted r ON r.replay_of = c.id
    WHERE c.replays = 0
    GROUP BY c.fingerprint
),
locked_groups AS (
    SELECT g.fingerprint FROM switchyard.dead_letter_groups g
    WHERE g.fingerprint IN (SELECT l.fingerprint FROM left_groups l)
    ORDER BY g.fingerprint
    FOR UPDATE OF g
),
counted AS (
    UPDATE switchyard.dead_letter_groups g SET dead = greatest(g.dead - l.replayed, 0)
    FROM left_groups l
    WHERE g.fingerprint = l.fingerprint AND g.fingerprint IN (SELECT lg.fingerprint FROM locked_groups lg)
)
SELECT c.id::bigint AS id,
    (CASE WHEN c.status = 'replayed' AND r.id IS NULL THEN 'request_reused' ELSE c.status END)::text AS status,
    coalesce(c.state, '')::text AS state,
    (c.blocking AND r.id IS NOT NULL)::boolean AS blocking,
    coalesce(r.id, CASE WHEN c.status = 'existing' THEN c.prev_id END, 0)::bigint AS replay_id,
    coalesce(r.delivery_key, CASE WHEN c.status = 'existing' THEN c.prev_key END, '00000000-0000-0000-0000-000000000000')::uuid AS delivery_key
FROM classified c
LEFT JOIN inserted r ON r.replay_of = c.id
ORDER BY c.id;

-- name: OutboxUnblockHeads :exec
-- OutboxUnblockHeads releases the aggregates blocked by the given dead heads
-- (those that block nothing are ignored): due at once. take_place: each was
-- replayed by a row that took its aggregate_seq, so its aggregate is done
-- only up to just before it; else (a discard) the head stays done.
WITH heads AS (
    SELECT o.id, o.aggregate_seq FROM switchyard.outbox o
    WHERE o.id = ANY(@ids::bigint[]) AND o.aggregate_seq IS NOT NULL
),
unblocked AS (
    DELETE FROM switchyard.outbox_blocked_aggregates b
    USING heads h
    WHERE b.dead_message_id = h.id
    RETURNING b.destination, b.aggregate_type, b.aggregate_id, b.dead_message_id
)
UPDATE switchyard.outbox_aggregates a
SET due_at = now(),
    done_seq = CASE WHEN @take_place::boolean THEN least(a.done_seq, h.aggregate_seq - 1) ELSE a.done_seq END
FROM unblocked u
JOIN heads h ON h.id = u.dead_message_id
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
