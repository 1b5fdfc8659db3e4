-- switchyard.outbox: enqueue, the dispatcher's hot path (claim, extend,
-- finalize), its wake-up, retention, and the operator actions on one
-- message (replay, discard, restore: internal/outbox/replay.go, run in the
-- caller's transaction with its audit row). The design is in
-- migrations/00003_outbox.sql (an unordered message's lease expiry is
-- leased_until since migrations/00024_outbox_unordered_lease.sql); EXPLAIN
-- output for the claims is in internal/outbox/EXPLAIN.md.

-- name: OutboxActionPanelGet :one
-- OutboxActionPanelGet reads one message for its actions panel, with whether a
-- replay of it is in flight, the replay it most recently had, and whether
-- it is the dead head its aggregate is blocked by.
SELECT o.id, o.topic, o.destination, o.aggregate_type, o.aggregate_id, o.payload, o.headers, o.state,
    o.attempts, o.last_error, o.replay_of, o.replays, o.generation,
    EXISTS (SELECT 1 FROM switchyard.outbox r WHERE r.replay_of = o.id AND r.state = 'pending') AS replay_pending,
    coalesce((SELECT max(r.id) FROM switchyard.outbox r WHERE r.replay_of = o.id), 0)::bigint AS last_replay_id,
    coalesce((SELECT r.state FROM switchyard.outbox r WHERE r.replay_of = o.id ORDER BY r.id DESC LIMIT 1), '')::text AS last_replay_state,
    EXISTS (SELECT 1 FROM switchyard.outbox_blocked_aggregates b WHERE b.dead_message_id = o.id) AS blocking
FROM switchyard.outbox o
WHERE o.id = @id;

-- name: OutboxInsert :one
-- OutboxInsert enqueues one message if its destination exists, and
-- returns no row if not: the check and the insert in one round trip, and
-- the caller's transaction stays usable (the sequence trigger's check
-- would abort it). The trigger then keeps the destination from being
-- removed until commit; one removed between the two aborts the
-- transaction with the trigger's error, as after a separate check.
INSERT INTO switchyard.outbox (
    message_id, topic, destination, aggregate_type, aggregate_id, payload, headers, max_attempts, replay_of
)
SELECT @message_id, @topic, @destination, @aggregate_type, @aggregate_id, @payload, @headers, @max_attempts, @replay_of
WHERE EXISTS (SELECT FROM switchyard.destinations d WHERE d.name = @destination)
RETURNING id;

-- name: OutboxCopy :copyfrom
-- OutboxCopy enqueues a large batch with COPY (outbox.Enqueue above its
-- COPY threshold): the columns are OutboxInsert's, less replay_of (a
-- replay is never enqueued in bulk).
INSERT INTO switchyard.outbox (
    message_id, topic, destination, aggregate_type, aggregate_id, payload, headers, max_attempts
) VALUES (
    @message_id, @topic, @destination, @aggregate_type, @aggregate_id, @payload, @headers, @max_attempts
);

-- name: OutboxClaimTurn :many
-- OutboxClaimTurn takes, for the rest of its transaction, the advisory
-- lock of each destination named by keys (internal/outbox: one key per
-- destination), in the keys' order, sorted by the caller so that two
-- claims never wait for each other in opposite orders. The unordered
-- claim writes none of the first tries it leases (OutboxClaimUnordered):
-- its claims of a destination take turns, each sent after this in one
-- transaction, so that each one's snapshot sees every stretch committed
-- before it.
-- Rows, not a command, so that it can go out in a pipeline with the claim
-- (internal/outbox: queueing).
SELECT count(pg_advisory_xact_lock(k.key))::int AS locked FROM (SELECT unnest(@keys::bigint[]) AS key) k;

-- name: OutboxClaimUnordered :many
-- OutboxClaimUnordered leases up to batch_size due messages that have no
-- aggregate: at most caps[n] of destinations[n], so that a destination with
-- no free delivery slots cannot fill the dispatcher's window with messages
-- that would only wait. It runs after OutboxClaimTurn, in its transaction.
--
-- First tries (attempts 0) are leased as one stretch per destination
-- (migrations/00033_outbox_stretches.sql): one row of their ids, read and
-- not written; each is returned with its stretch's id, and its attempt is
-- counted at its finalize (attempts + 1 there), as an ordered message's
-- behind its aggregate's head is. The ids of every live stretch of these
-- destinations keep the claim off their first tries. A stretch whose lease
-- ran out is deleted, and its messages still at attempts 0 are retries
-- from then on: each is written the attempt that the dispatcher which
-- held it may have made (so that a message that kills its dispatcher
-- still runs out of attempts) and a new lease version (a fence against
-- that dispatcher's finalize), and is leased at once if the claim has room
-- for it. Retries (attempts > 0) are leased one by one: leased_until set
-- to the lease's expiry, lease_version + 1 and attempts + 1; a due retry
-- is claimable while no lease holds it. No indexed column changes, so the
-- row's new version can stay on its page without index entries
-- (migrations/00024_outbox_unordered_lease.sql). The candidates are read
-- without a row lock (claims take turns; nothing else writes a pending
-- message that no lease holds), and a retry's update checks its row again.
--
-- The messages in flight lead the index: a destination's scan starts after
-- (after_at[n], after_id[n]), the last message this dispatcher leased there
-- (none, or a time before any message's: at the head), so that it need not
-- step over them
-- (migrations/00030_outbox_due_unordered_id.sql; internal/outbox/marks.go
-- says when a dispatcher starts at the head again).
-- Every row also says whether an aggregate of aggregate_destinations (the
-- ordered claim's) was due when the claim began (aggregates_due, the same
-- on each): where none was, the worker does not send the ordered claim
-- after this one, which would find nothing (internal/outbox/claim.go). An
-- index probe per destination (outbox_aggregates_due: aggregates in flight
-- are due only when their lease expires, so they do not lead it),
-- evaluated once.
WITH expired AS (
    DELETE FROM switchyard.outbox_stretches s
    WHERE s.destination = ANY (@destinations::text[])
      AND s.leased_until <= coalesce(sqlc.narg(now)::timestamptz, now())
    RETURNING s.ids
),
expired_ids AS MATERIALIZED (
    SELECT unnest(e.ids) AS id FROM expired e
),
due AS MATERIALIZED (
    SELECT c.*, n.destination AS claimed_for
    FROM unnest(@destinations::text[]) WITH ORDINALITY AS n (destination, i)
    CROSS JOIN LATERAL (
        SELECT o.id, coalesce(o.delivery_key, o.message_id)::uuid AS message_id, o.topic, o.aggregate_type, o.aggregate_id,
            o.payload, o.headers, o.attempts, o.max_attempts, o.lease_version, o.created_at, o.next_attempt_at
        FROM switchyard.outbox o
        WHERE o.state = 'pending' AND o.aggregate_id = ''
          AND o.destination = n.destination
          AND o.next_attempt_at <= coalesce(sqlc.narg(now)::timestamptz, now())
          AND (o.next_attempt_at, o.id) > (coalesce((@after_at::timestamptz[])[n.i], '-infinity'), coalesce((@after_id::bigint[])[n.i], 0))
          AND (o.leased_until IS NULL OR o.leased_until <= coalesce(sqlc.narg(now)::timestamptz, now()))
          -- One hash of the stretches' ids for the whole statement (an
          -- uncorrelated NOT IN), not a walk of an array per message.
          AND (o.attempts > 0 OR o.id NOT IN (
              SELECT unnest(s.ids) FROM switchyard.outbox_stretches s
              WHERE s.destination = ANY (@destinations::text[])
                AND s.leased_until > coalesce(sqlc.narg(now)::timestamptz, now())))
        ORDER BY o.next_attempt_at, o.id
        LIMIT (@caps::int[])[n.i]
    ) c
    LIMIT @batch_size
),
-- Leased one by one: retries, and the first tries of expired stretches.
retries AS MATERIALIZED (
    SELECT due.id FROM due WHERE due.attempts > 0 OR due.id IN (SELECT x.id FROM expired_ids x)
),
-- An expired stretch's messages that this claim has no room for.
expired_messages AS (
    UPDATE switchyard.outbox o
    SET attempts = o.attempts + 1, lease_version = o.lease_version + 1
    WHERE o.id = ANY (ARRAY(SELECT x.id FROM expired_ids x WHERE x.id NOT IN (SELECT r.id FROM retries r)))
      AND o.state = 'pending' AND o.attempts = 0
),
retried AS (
    UPDATE switchyard.outbox o
    SET lease_owner = @owner::text,
        lease_version = o.lease_version + 1,
        leased_until = coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => @lease_seconds::float8),
        -- An expired stretch's message: the attempt it may have had, and
        -- this one.
        attempts = o.attempts + CASE WHEN o.attempts = 0 THEN 2 ELSE 1 END
    -- One probe of the primary key per claimed message. Joined to due
    -- instead, the planner hashed the whole outbox, read sequentially, as
    -- soon as a claim was large (a fast destination's groups: 1,024
    -- messages), and a claim cost as much as the table was big
    -- (BENCHMARKS.md, "Claims and finalizes that cost what they touch").
    -- The conditions again, on the row's latest version.
    WHERE o.id = ANY (ARRAY(SELECT r.id FROM retries r))
      AND o.state = 'pending'
      AND o.next_attempt_at <= coalesce(sqlc.narg(now)::timestamptz, now())
      AND (o.leased_until IS NULL OR o.leased_until <= coalesce(sqlc.narg(now)::timestamptz, now()))
    RETURNING o.id, coalesce(o.delivery_key, o.message_id)::uuid AS message_id, o.topic, o.destination, o.aggregate_type, o.aggregate_id,
        o.payload, o.headers, o.attempts, o.max_attempts, o.lease_version, o.created_at, o.next_attempt_at
),
stretched AS (
    INSERT INTO switchyard.outbox_stretches (destination, owner, leased_until, ids)
    SELECT due.claimed_for, @owner::text,
        coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => @lease_seconds::float8),
        -- In no order: an aggregate with an ORDER BY cannot be hashed, and the
        -- claims' sessions sort nothing (internal/outbox, claimSettings).
        array_agg(due.id)
    FROM due WHERE due.id NOT IN (SELECT r.id FROM retries r)
    GROUP BY due.claimed_for
    RETURNING id, destination
),
leased AS (
    SELECT r.*, 0::bigint AS stretch FROM retried r
    UNION ALL
    SELECT due.id, due.message_id, due.topic, due.claimed_for, due.aggregate_type, due.aggregate_id,
        due.payload, due.headers, due.attempts, due.max_attempts, due.lease_version, due.created_at, due.next_attempt_at,
        s.id
    FROM due JOIN stretched s ON s.destination = due.claimed_for
    WHERE due.id NOT IN (SELECT r.id FROM retries r)
)
SELECT l.id, l.message_id, l.topic, l.destination, l.aggregate_type, l.aggregate_id,
    l.payload, l.headers, l.attempts, l.max_attempts, l.lease_version, l.created_at, l.next_attempt_at,
    l.stretch::bigint AS stretch,
    EXISTS (
        SELECT FROM unnest(@aggregate_destinations::text[]) AS n (destination)
        CROSS JOIN LATERAL (
            SELECT FROM switchyard.outbox_aggregates a
            WHERE a.last_seq > a.done_seq AND a.destination = n.destination
              AND a.due_at <= coalesce(sqlc.narg(now)::timestamptz, now())
            ORDER BY a.due_at
            LIMIT 1
        ) a
    ) AS aggregates_due
FROM leased l;

-- name: OutboxClaimOrdered :many
-- OutboxClaimOrdered leases up to aggregates due aggregates (see
-- migrations/00003_outbox.sql), at most caps[n] of
-- destinations[n] as in OutboxClaimUnordered and at most 128 of any
-- (internal/outbox: orderedClaimMost), and, in each, its first
-- per_aggregate pending messages in aggregate_seq order; one worker delivers
-- them in that order. The aggregate's lease (due_at = expiry, lease_version
-- + 1) keeps every other worker off its later messages until the finalize.
-- Lock order, here and in OutboxFinalize: the aggregate row, then its
-- messages. Every row also says whether an unordered message of
-- destinations was due when the claim began (unordered_due, the same on
-- each), looked for as OutboxClaimUnordered would (its stretches' first
-- tries are not due), after (after_at[n], after_id[n]): where none was,
-- the worker does not send the unordered claim after this one.
WITH due AS (
    SELECT c.destination, c.aggregate_type, c.aggregate_id
    FROM unnest(@destinations::text[]) WITH ORDINALITY AS n (destination, i)
    CROSS JOIN LATERAL (
        -- At most 128 aggregates of a destination per statement, whatever
        -- its cap: a constant the planner can see. Without it the generic plan
        -- took each destination's LIMIT (a parameter) for a tenth of the
        -- aggregates that might be due (a third of a third of the table),
        -- expected hundreds to lease (a thousand on a table of 100,000),
        -- leased them through a hash of the whole table read sequentially
        -- (38 ms there), and was estimated so much dearer than a plan for
        -- the arguments that PostgreSQL planned every claim anew (about
        -- 1 ms each, more than the claim's own work) once the table held
        -- some 10,000 to 17,000 aggregates, depending on the load
        -- (BENCHMARKS.md, "The ordered claim's generic plan over many
        -- aggregates"). The dispatcher asks for no more (orderedClaimMost).
        SELECT * FROM (
            SELECT a.destination, a.aggregate_type, a.aggregate_id
            FROM switchyard.outbox_aggregates a
            WHERE a.last_seq > a.done_seq
              AND a.destination = n.destination
              AND a.due_at <= coalesce(sqlc.narg(now)::timestamptz, now())
            ORDER BY a.due_at
            LIMIT 128
            -- Each row is locked as the LIMIT below takes it: no more than
            -- caps[n] of them, the first due first. No ORDER BY there: a
            -- sort would take, and lock, all 128 first.
            FOR UPDATE SKIP LOCKED
        ) first_due
        LIMIT (@caps::int[])[n.i]
    ) c
    LIMIT @aggregates
),
leased AS (
    UPDATE switchyard.outbox_aggregates a
    SET lease_owner = @owner::text,
        lease_version = a.lease_version + 1,
        due_at = coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => @lease_seconds::float8)
    FROM due
    WHERE a.destination = due.destination AND a.aggregate_type = due.aggregate_type AND a.aggregate_id = due.aggregate_id
    RETURNING a.destination, a.aggregate_type, a.aggregate_id, a.lease_version
),
-- Each message's columns are read here, where its row is visited anyway
-- (the index holds none of them), not again at the end through the
-- primary key: that second probe per message was two thirds of a claim's
-- buffer touches, and the part that grows as the retained history deepens
-- the index (internal/outbox/EXPLAIN.md).
heads AS (
    SELECT m.id, m.message_id, m.topic, m.destination, m.aggregate_type, m.aggregate_id, m.payload, m.headers,
        m.attempts, m.max_attempts, m.lease_version, m.created_at, m.aggregate_seq,
        l.lease_version AS aggregate_lease_version, m.n = 1 AS head
    FROM leased l
    CROSS JOIN LATERAL (
        SELECT o.id, coalesce(o.delivery_key, o.message_id) AS message_id, o.topic, o.destination, o.aggregate_type,
            o.aggregate_id, o.payload, o.headers, o.attempts, o.max_attempts, o.lease_version, o.created_at,
            o.aggregate_seq, row_number() OVER (ORDER BY o.aggregate_seq) AS n
        FROM switchyard.outbox o
        WHERE o.state = 'pending' AND o.aggregate_id <> ''
          AND o.destination = l.destination AND o.aggregate_type = l.aggregate_type AND o.aggregate_id = l.aggregate_id
        ORDER BY o.aggregate_seq
        LIMIT @per_aggregate
    ) m
),
-- Only the first message of each aggregate is written here: it counts its
-- attempt (so a message that crashes its dispatcher still runs out of
-- attempts) and carries the lease (lease_owner, lease_version + 1: the
-- console shows it in flight). The others are read, not written: the
-- aggregate's lease alone fences them (every finalize of an ordered
-- message checks it), they count their attempts at finalize if they were
-- tried (a lost finalize or lease must not burn attempts of messages that
-- were never sent), and writing each of them cost a sixth of an ordered
-- drain's CPU (BENCHMARKS.md, "The ordered claim writes the head only").
-- Their lease_version is returned as it stands, which their finalize
-- checks as before; their attempts record it, the message's own lease
-- version, which only its claims as a head raise (the aggregate's lease is
-- what fenced them).
--
-- The heads on their own first, an aggregate's one row each: whatever
-- join the plan makes of them with the outbox below, it reads no more
-- than them. Joined to heads itself, a generic plan made while the
-- statistics said no message was pending (a history of delivered ones,
-- described) expected one head, made the join a nested loop and read all
-- of heads, every message the claim took, once per head: 80,000 rows for
-- a claim of 50 aggregates' 1,600 messages, about half of its time
-- (BENCHMARKS.md, "The retained drain's claims: heads read once per
-- head").
head_rows AS (
    SELECT h.id, h.aggregate_lease_version FROM heads h WHERE h.head
),
counted AS (
    UPDATE switchyard.outbox o
    SET lease_owner = @owner::text,
        lease_version = o.lease_version + 1,
        attempts = o.attempts + 1
    FROM head_rows h
    -- The heads' ids again, as an index condition on the outbox whatever
    -- the join (see OutboxClaimUnordered): a generic plan made while the
    -- statistics said no message was pending read every pending message
    -- for each head instead (BENCHMARKS.md, "A quiet machine: ...; the
    -- ordered claim's plan made while few messages were pending").
    WHERE o.id = ANY (ARRAY(SELECT hr.id FROM head_rows hr)) AND o.id = h.id AND o.state = 'pending'
    RETURNING o.id, coalesce(o.delivery_key, o.message_id) AS message_id, o.topic, o.destination, o.aggregate_type,
        o.aggregate_id, o.payload, o.headers, o.attempts, o.max_attempts, o.lease_version, o.created_at,
        o.aggregate_seq, h.aggregate_lease_version
),
-- A CTE that both halves of the union below read, evaluated once.
unordered_due AS (
    SELECT EXISTS (
        SELECT FROM unnest(@destinations::text[]) WITH ORDINALITY AS n (destination, i)
        CROSS JOIN LATERAL (
            SELECT FROM switchyard.outbox o
            WHERE o.state = 'pending' AND o.aggregate_id = ''
              AND o.destination = n.destination
              AND o.next_attempt_at <= coalesce(sqlc.narg(now)::timestamptz, now())
              AND (o.next_attempt_at, o.id) > (coalesce((@after_at::timestamptz[])[n.i], '-infinity'), coalesce((@after_id::bigint[])[n.i], 0))
              AND (o.leased_until IS NULL OR o.leased_until <= coalesce(sqlc.narg(now)::timestamptz, now()))
              AND (o.attempts > 0 OR o.id NOT IN (
                  SELECT unnest(s.ids) FROM switchyard.outbox_stretches s
                  WHERE s.destination = ANY (@destinations::text[])
                    AND s.leased_until > coalesce(sqlc.narg(now)::timestamptz, now())))
            -- The claim's order, so that the probe reads the claim's index.
            ORDER BY o.next_attempt_at, o.id
            LIMIT 1
        ) o
    ) AS due
)
-- The heads that were written, with what was written (a head that was not,
-- no longer pending when counted's update read it again, is not
-- delivered), and the other messages as they were read. A union of the
-- two, not heads left-joined to counted: the generic plan, which expects
-- one row of each, made that join a nested loop that read counted once per
-- message (a claim of 100 aggregates' 3,200 messages compared 320,000
-- pairs: 102 ms, where the custom plan took 22; internal/outbox/EXPLAIN.md).
SELECT c.id, c.message_id::uuid AS message_id, c.topic, c.destination, c.aggregate_type, c.aggregate_id,
    c.payload, c.headers, c.attempts::int AS attempts, c.max_attempts,
    c.lease_version::bigint AS lease_version, c.created_at,
    c.aggregate_seq::bigint AS aggregate_seq, c.aggregate_lease_version::bigint AS aggregate_lease_version, true AS counted,
    u.due AS unordered_due
FROM counted c, unordered_due u
UNION ALL
SELECT h.id, h.message_id::uuid, h.topic, h.destination, h.aggregate_type, h.aggregate_id,
    h.payload, h.headers, h.attempts::int, h.max_attempts,
    h.lease_version::bigint, h.created_at,
    h.aggregate_seq::bigint, h.aggregate_lease_version::bigint, false, u.due
FROM heads h, unordered_due u
WHERE NOT h.head;

-- name: OutboxExtendLeases :many
-- OutboxExtendLeases is the heartbeat of deliveries in flight: it pushes the
-- lease expiry of each (id, lease_version) still held, and returns the ids
-- it extended; a missing one has lost its lease.
UPDATE switchyard.outbox o
SET leased_until = coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => @lease_seconds::float8)
FROM (SELECT unnest(@ids::bigint[]) AS id, unnest(@lease_versions::bigint[]) AS lease_version) AS l
-- The ids again, as an index condition on the outbox (see
-- OutboxClaimUnordered), beside the join.
WHERE o.id = ANY (@ids::bigint[]) AND o.id = l.id AND o.lease_version = l.lease_version AND o.state = 'pending'
  -- A lease that a finalize gave back (a retry, a release: lease_owner
  -- cleared, the lease version unchanged) is not taken again by a
  -- heartbeat that reached the server after it.
  AND o.lease_owner IS NOT NULL
RETURNING o.id;

-- name: OutboxExtendStretches :many
-- OutboxExtendStretches is the heartbeat of stretches in flight
-- (OutboxClaimUnordered): it pushes the lease expiry of each still there,
-- and returns the ids it extended; a missing one was deleted by a claim
-- that found it expired, which gave its messages a new lease version.
UPDATE switchyard.outbox_stretches s
SET leased_until = coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => @lease_seconds::float8)
WHERE s.id = ANY (@ids::bigint[])
RETURNING s.id;

-- name: OutboxStretchesRelease :exec
-- OutboxStretchesRelease gives back first tries that a claim leased in
-- stretches but will not deliver (internal/outbox: the claim's excess):
-- their ids leave their stretches, and a stretch left with none is
-- deleted. Their own rows were never written: they are due again as they
-- were.
WITH shrunk AS (
    UPDATE switchyard.outbox_stretches s
    SET ids = ARRAY(SELECT x FROM unnest(s.ids) AS x WHERE x <> ALL (@ids::bigint[]))
    WHERE s.id = ANY (@stretches::bigint[]) AND NOT s.ids <@ @ids::bigint[]
)
DELETE FROM switchyard.outbox_stretches s
WHERE s.id = ANY (@stretches::bigint[]) AND s.ids <@ @ids::bigint[];

-- name: OutboxExtendAggregateLeases :many
-- OutboxExtendAggregateLeases is the heartbeat of aggregates in flight (their
-- messages' leases are the aggregate's). It never waits: an aggregate row
-- that an enqueuing transaction holds (its trigger numbers the messages) is
-- skipped and reported 'busy', one whose lease was taken over 'lost'.
-- Waiting there could hold the dispatcher for as long as any business
-- transaction, or deadlock with one.
WITH input AS (
    -- Parallel arrays, one element per aggregate: see OutboxFinalize.
    SELECT unnest(@destinations::text[]) AS destination,
        unnest(@aggregate_types::text[]) AS aggregate_type,
        unnest(@aggregate_ids::text[]) AS aggregate_id,
        unnest(@lease_versions::bigint[]) AS lease_version
),
locked AS (
    SELECT a.destination, a.aggregate_type, a.aggregate_id
    FROM switchyard.outbox_aggregates a
    JOIN input i ON a.destination = i.destination AND a.aggregate_type = i.aggregate_type AND a.aggregate_id = i.aggregate_id
    FOR UPDATE OF a SKIP LOCKED
),
extended AS (
    UPDATE switchyard.outbox_aggregates a
    SET due_at = coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => @lease_seconds::float8)
    FROM input i
    WHERE a.destination = i.destination AND a.aggregate_type = i.aggregate_type
      AND a.aggregate_id = i.aggregate_id AND a.lease_version = i.lease_version
      AND (a.destination, a.aggregate_type, a.aggregate_id) IN (SELECT * FROM locked)
    RETURNING a.destination, a.aggregate_type, a.aggregate_id
)
SELECT i.destination::text AS destination, i.aggregate_type::text AS aggregate_type, i.aggregate_id::text AS aggregate_id,
    CASE WHEN e.destination IS NOT NULL THEN 'extended'
         WHEN l.destination IS NULL THEN 'busy'
         ELSE 'lost' END::text AS status
FROM input i
LEFT JOIN extended e ON e.destination = i.destination AND e.aggregate_type = i.aggregate_type AND e.aggregate_id = i.aggregate_id
LEFT JOIN locked l ON l.destination = i.destination AND l.aggregate_type = i.aggregate_type AND l.aggregate_id = i.aggregate_id;

-- name: OutboxFinalize :many
-- OutboxFinalize applies a batch of outcomes in one statement. Each row
-- applies only if its lease_version is still current (fencing): a stale one
-- changes nothing and is absent from the result. Every attempt is recorded,
-- applied or not. A dead message with an aggregate blocks that aggregate.
-- outcome: delivered, retry (pending again after retry_delay_ms), dead, or
-- released (pending again after retry_delay_ms, the attempt given back: it
-- never started).
WITH input AS (
    -- Parallel arrays, one element per message, unnested side by side:
    -- set-returning functions in one select list run in lockstep, a row
    -- per element (sqlc cannot type a multi-argument unnest). Not by
    -- subscript: finding an element of a text array walks the elements
    -- before it, and a 1,000-message finalize spent 20 to 40 ms on that
    -- alone.
    SELECT unnest(@ids::bigint[]) AS id,
        unnest(@lease_versions::bigint[]) AS lease_version,
        -- The message's aggregate: its position in the aggregate_ arrays,
        -- 0 for a message without one.
        unnest(@aggregate_of::int[]) AS aggregate_of,
        unnest(@attempt_numbers::int[]) AS attempt,
        unnest(@outcomes::text[]) AS outcome,
        unnest(@retry_delays_ms::float8[]) AS retry_delay_ms,
        unnest(@attempt_deltas::int[]) AS attempt_delta,
        unnest(@errors::text[]) AS error,
        unnest(@fingerprints::text[]) AS fingerprint,
        unnest(@status_codes::int[]) AS status_code,
        unnest(@responses::text[]) AS response,
        unnest(@started_ats::timestamptz[]) AS started_at,
        unnest(@finished_ats::timestamptz[]) AS finished_at
),
aggregate_input AS (
    -- The positions (1, 2, ...) come as an array too: an unnest of an
    -- array parameter is planned as ten rows, as input's are, where a
    -- generate_series over one was a thousand, and a small finalize's
    -- generic plan then read and hashed all of outbox_aggregates to lock
    -- its few rows (BENCHMARKS.md, "A small finalize that expects as many
    -- aggregates as messages").
    SELECT unnest(@aggregate_positions::int[]) AS position,
        unnest(@aggregate_destinations::text[]) AS destination,
        unnest(@aggregate_types::text[]) AS aggregate_type,
        unnest(@aggregate_ids::text[]) AS aggregate_id,
        unnest(@aggregate_lease_versions::bigint[]) AS lease_version,
        unnest(@aggregate_done_seqs::bigint[]) AS done_seq,
        unnest(@aggregate_due_in_ms::float8[]) AS due_in_ms,
        unnest(@aggregate_blocked::boolean[]) AS blocked
),
-- The aggregates first (the claim's lock order), never waiting: a row that
-- an enqueuing transaction holds is skipped, and the outcomes of its
-- messages are left for a later finalize (reported 'busy' below), so that
-- no business transaction can hold up or deadlock the dispatcher.
locked_aggregates AS (
    SELECT a.destination, a.aggregate_type, a.aggregate_id
    FROM switchyard.outbox_aggregates a
    JOIN aggregate_input ai ON a.destination = ai.destination AND a.aggregate_type = ai.aggregate_type AND a.aggregate_id = ai.aggregate_id
    FOR UPDATE OF a SKIP LOCKED
),
busy AS (
    SELECT i.id FROM input i
    JOIN aggregate_input ai ON ai.position = i.aggregate_of
    WHERE NOT EXISTS (
        SELECT 1 FROM locked_aggregates l
        WHERE l.destination = ai.destination AND l.aggregate_type = ai.aggregate_type AND l.aggregate_id = ai.aggregate_id)
),
-- The stretches whose last messages this finalize applies
-- (internal/outbox counts each stretch's messages down): what the claims
-- keep off stays the size of what is in flight. A stretch's messages are
-- fenced by their lease version, which a claim that finds the stretch
-- expired moves on (OutboxClaimUnordered).
done_stretches AS (
    DELETE FROM switchyard.outbox_stretches s WHERE s.id = ANY (@done_stretches::bigint[])
),
-- Fenced by their lease version: done up to the last finished message, due
-- again now, after the head's retry delay, or never while a dead head
-- blocks it.
aggregates AS (
    UPDATE switchyard.outbox_aggregates a
    SET done_seq = greatest(a.done_seq, ai.done_seq),
        due_at = CASE WHEN ai.blocked THEN 'infinity'::timestamptz
            ELSE coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => ai.due_in_ms / 1000) END,
        lease_owner = NULL
    FROM aggregate_input ai
    WHERE a.destination = ai.destination AND a.aggregate_type = ai.aggregate_type
      AND a.aggregate_id = ai.aggregate_id AND a.lease_version = ai.lease_version
      AND (a.destination, a.aggregate_type, a.aggregate_id) IN (SELECT * FROM locked_aggregates)
    RETURNING a.destination, a.aggregate_type, a.aggregate_id,
        -- More messages, due at once: see more_due below.
        a.last_seq > a.done_seq AND NOT ai.blocked AND ai.due_in_ms <= 0 AS more_due
),
applied AS (
    UPDATE switchyard.outbox o
    SET state = CASE i.outcome WHEN 'delivered' THEN 'delivered' WHEN 'dead' THEN 'dead' ELSE 'pending' END,
        -- Retry times come from the database's clock, like every claim's.
        next_attempt_at = CASE WHEN i.outcome IN ('retry', 'released')
            THEN coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => i.retry_delay_ms / 1000)
            ELSE o.next_attempt_at END,
        attempts = o.attempts + i.attempt_delta,
        lease_owner = NULL,
        leased_until = NULL,
        last_error = CASE WHEN i.outcome = 'released' THEN o.last_error ELSE NULLIF(i.error, '') END,
        error_fingerprint = CASE WHEN i.outcome = 'released' THEN o.error_fingerprint ELSE NULLIF(i.fingerprint, '') END,
        finished_at = CASE WHEN i.outcome IN ('delivered', 'dead') THEN now() END,
        -- The attempt that delivered the message is recorded here, not in
        -- outbox_attempts (migrations/00023_outbox_delivered_attempt.sql).
        delivered_by = CASE WHEN i.outcome = 'delivered' THEN @worker::text END,
        delivered_started_at = CASE WHEN i.outcome = 'delivered' THEN i.started_at END,
        delivered_ms = CASE WHEN i.outcome = 'delivered' THEN extract(epoch FROM i.finished_at - i.started_at) * 1000 END,
        delivered_status = CASE WHEN i.outcome = 'delivered' THEN NULLIF(i.status_code, 0) END,
        delivered_response = CASE WHEN i.outcome = 'delivered' THEN NULLIF(i.response, '') END
    FROM input i
    -- The ids again, as an index condition on the outbox whatever the
    -- join: see OutboxClaimUnordered. Read from input, not from the ids'
    -- parameter: a finalize statement of more than genericPlanMost
    -- messages (one that internal/outbox's genericChunks does not split)
    -- is planned for its arguments, and the planner estimated the ids'
    -- array element by element: half the planning of an unordered
    -- drain's finalizes, about 900 messages each (BENCHMARKS.md, "The
    -- finalize's ids read from its input").
    WHERE o.id = ANY (ARRAY(SELECT i.id FROM input i)) AND o.id = i.id AND o.lease_version = i.lease_version AND o.state = 'pending'
      -- An ordered message applies only under its aggregate's lease.
      AND (o.aggregate_id = '' OR EXISTS (
          SELECT 1 FROM aggregates g
          WHERE g.destination = o.destination AND g.aggregate_type = o.aggregate_type AND g.aggregate_id = o.aggregate_id))
    RETURNING o.id, o.lease_version, o.state, o.destination, o.topic, o.aggregate_type, o.aggregate_id, o.created_at,
        coalesce(o.error_fingerprint, '') AS error_fingerprint, coalesce(o.last_error, '') AS last_error,
        o.replay_of, o.replay_job
),
-- An input row applied if it is the one its message was updated under: a
-- batch may hold one message twice (a delivery whose lease ran out before
-- its outcome was finalized, and the delivery of the same message under
-- its next lease), and only the current lease's row applies. A delivery
-- that applied is recorded on the message's row (applied above).
attempts AS (
    INSERT INTO switchyard.outbox_attempts (
        message_id, attempt, worker, lease_version, started_at, finished_at,
        outcome, applied, status_code, response, error, duration_ms)
    SELECT i.id, i.attempt, @worker::text, i.lease_version, i.started_at, i.finished_at,
        i.outcome, i.applied, NULLIF(i.status_code, 0),
        NULLIF(i.response, ''), NULLIF(i.error, ''),
        extract(epoch FROM i.finished_at - i.started_at) * 1000
    FROM (
        SELECT i.*, EXISTS (SELECT 1 FROM applied a WHERE a.id = i.id AND a.lease_version = i.lease_version) AS applied
        FROM input i
        WHERE i.outcome <> 'released' AND i.id NOT IN (SELECT b.id FROM busy b)
    ) i
    WHERE NOT (i.applied AND i.outcome = 'delivered')
),
blocked AS (
    INSERT INTO switchyard.outbox_blocked_aggregates (destination, aggregate_type, aggregate_id, dead_message_id)
    SELECT a.destination, a.aggregate_type, a.aggregate_id, a.id FROM applied a
    WHERE a.state = 'dead' AND a.aggregate_id <> ''
    ON CONFLICT DO NOTHING
),
dead_groups AS (
    INSERT INTO switchyard.dead_letter_groups AS g (fingerprint, dead, first_dead_at, last_dead_at, sample_id, sample_error, destinations)
    SELECT a.error_fingerprint, count(*), now(), now(), max(a.id),
        (array_agg(a.last_error ORDER BY a.id DESC))[1], array_agg(DISTINCT a.destination ORDER BY a.destination)
    FROM applied a WHERE a.state = 'dead'
    GROUP BY a.error_fingerprint
    -- Rows in one order in every finalize: two finalizes upserting the
    -- same groups cannot deadlock.
    ORDER BY a.error_fingerprint
    ON CONFLICT (fingerprint) DO UPDATE SET
        dead = g.dead + EXCLUDED.dead,
        last_dead_at = EXCLUDED.last_dead_at,
        sample_id = EXCLUDED.sample_id,
        sample_error = EXCLUDED.sample_error,
        destinations = ARRAY(SELECT DISTINCT d FROM unnest(g.destinations || EXCLUDED.destinations) AS d ORDER BY d)
),
-- The change feed (migrations/00005_changes.sql): one row per group
-- per finalize; the dispatcher sends the wake-up NOTIFY after commit.
dead_feed AS (
    INSERT INTO switchyard.changes (kind, subject, payload)
    SELECT 'dead_letter', left(a.error_fingerprint, 512),
        jsonb_build_object('dead', count(*), 'destinations', array_agg(DISTINCT a.destination ORDER BY a.destination))
    FROM applied a WHERE a.state = 'dead'
    GROUP BY a.error_fingerprint
),
-- A replay that settled (delivered or dead) changes what the pages of its
-- original show: a change for the replay, its original and its bulk job,
-- if any. Only replays, which are rare: an ordinary message's finalize
-- writes no feed row (the dispatcher sends the NOTIFY after commit,
-- reported by the status 'applied_replay').
replay_feed AS (
    INSERT INTO switchyard.changes (kind, subject, payload)
    SELECT 'message_changed', m.id::text, jsonb_build_object('action', 'message.' || a.state)
    FROM applied a CROSS JOIN LATERAL (VALUES (a.id), (a.replay_of)) AS m(id)
    WHERE a.replay_of IS NOT NULL AND a.state <> 'pending'
    UNION ALL
    SELECT 'replay_job', a.replay_job::text, jsonb_build_object('settled', count(*))
    FROM applied a WHERE a.replay_job IS NOT NULL AND a.state <> 'pending'
    GROUP BY a.replay_job
),
dead_hours AS (
    INSERT INTO switchyard.dead_letter_hours AS h (fingerprint, hour, dead)
    SELECT a.error_fingerprint, date_trunc('hour', now()), count(*)
    FROM applied a WHERE a.state = 'dead'
    GROUP BY a.error_fingerprint
    ORDER BY a.error_fingerprint
    ON CONFLICT (fingerprint, hour) DO UPDATE SET dead = h.dead + EXCLUDED.dead
),
stats AS (
    INSERT INTO switchyard.delivery_stats AS s (second, destination, topic, worker, delivered, retried, dead, latency_ms_sum)
    SELECT date_trunc('second', now()), a.destination, a.topic, @worker::text,
        count(*) FILTER (WHERE i.outcome = 'delivered'),
        count(*) FILTER (WHERE i.outcome = 'retry'),
        count(*) FILTER (WHERE i.outcome = 'dead'),
        coalesce(sum(extract(epoch FROM i.finished_at - a.created_at) * 1000) FILTER (WHERE i.outcome = 'delivered'), 0)
    FROM applied a JOIN input i ON i.id = a.id AND i.lease_version = a.lease_version
    WHERE i.outcome <> 'released'
    GROUP BY a.destination, a.topic
    ON CONFLICT (second, destination, topic, worker) DO UPDATE SET
        delivered = s.delivered + EXCLUDED.delivered,
        retried = s.retried + EXCLUDED.retried,
        dead = s.dead + EXCLUDED.dead,
        latency_ms_sum = s.latency_ms_sum + EXCLUDED.latency_ms_sum
)
SELECT a.id, (CASE WHEN a.replay_of IS NOT NULL AND a.state <> 'pending' THEN 'applied_replay' ELSE 'applied' END)::text AS status
FROM applied a
UNION ALL
SELECT b.id, 'busy'::text FROM busy b
UNION ALL
-- One row, with no message (id 0), when an aggregate moved on here has
-- more messages due at once (enqueued while it was leased, their wake-ups
-- finding it leased; beyond what the claim took; or given back unsent):
-- the worker claims again for them. Otherwise a finalize gives it no
-- reason to.
SELECT 0, 'more_due'::text WHERE EXISTS (SELECT 1 FROM aggregates g WHERE g.more_due);

-- name: OutboxPruneDelivered :execrows
-- OutboxPruneDelivered deletes up to batch_size delivered messages finished
-- before the cutoff (their attempts go with them). Small batches keep each
-- delete short; retention repeats until nothing is left.
DELETE FROM switchyard.outbox
WHERE id IN (
    SELECT o.id FROM switchyard.outbox o
    WHERE o.state = 'delivered' AND o.finished_at < @cutoff
      AND NOT EXISTS (SELECT 1 FROM switchyard.outbox r WHERE r.replay_of = o.id)
    ORDER BY o.finished_at
    LIMIT @batch_size
);

-- name: OutboxListen :exec
-- OutboxListen subscribes the process's LISTEN connection (internal/pglisten)
-- to the dispatchers' wake-up.
LISTEN switchyard_outbox;

-- name: OutboxNotify :exec
-- OutboxNotify wakes idle dispatchers, in a transaction of its own, never
-- inside an enqueuing one (see outbox.Notify): the setting it makes for
-- its transaction, a commit that does not wait for the WAL to reach disk,
-- must not reach an enqueue. A wake-up needs no durability (dispatchers
-- poll anyway) and listeners see it at the commit, not at the flush;
-- waiting would put a second WAL flush between an enqueuer's commit and
-- the dispatchers' wake-up. The channel (outbox.WakeChannel) is an
-- argument: pgx sends a statement without arguments in the simple
-- protocol, which PostgreSQL plans at every call (at 1,000 enqueues a
-- second, more of the server's time than the NOTIFY's own execution);
-- with one it is prepared once per connection and its plan kept.
SELECT pg_notify(@channel::text, ''), set_config('synchronous_commit', 'off', true);

-- name: OutboxLockForAction :one
-- OutboxLockForAction locks a message for an operator action: replays and
-- discards of one message are applied one at a time.
SELECT o.id, o.message_id, coalesce(o.delivery_key, o.message_id)::uuid AS delivery_key, o.state,
    o.topic, o.destination, o.aggregate_type, o.aggregate_id, o.aggregate_seq, o.payload, o.headers,
    o.max_attempts, o.error_fingerprint, o.generation
FROM switchyard.outbox o
WHERE o.id = @id
FOR UPDATE OF o;

-- name: OutboxActionStateGet :one
-- OutboxActionStateGet says, once the message is locked (a statement of its
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
        coalesce(sqlc.narg(payload)::json, c.payload), c.headers, c.max_attempts,
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
-- A message leaves its dead-letter group at its first replay (its status
-- turns from dead to replayed: switchyard.console_messages); a replay that
-- dies again is counted again.
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
-- OutboxDiscard archives a dead message, out of its dead-letter group. A
-- group's dead counts its messages of status dead (switchyard.console_messages:
-- never replayed, replays = 0 here), which the console's counts and lists
-- must agree with (TestEveryDeadCountAgreesWithConsoleMessages).
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
-- again: the messages after it may have been delivered meanwhile. Its
-- group counts it again if its status is dead again (replays = 0; see
-- OutboxDiscard); one replayed before its discard comes back as replayed,
-- outside the group.
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

-- name: OutboxPlanStatistics :one
-- OutboxPlanStatistics is how many rows the planner's statistics say the
-- claims' tables hold, as the last ANALYZE, VACUUM or CREATE INDEX of each
-- found them (-1 on PostgreSQL 14 and later when none has run), and how
-- big the aggregates' table is now. The dispatcher lets PostgreSQL keep a
-- claim's generic plan only above a floor, or while a table is small
-- (internal/outbox/plan.go). Where a table's statistics are below the
-- floor, *_rows counts its rows now, up to the floor (a scan that stops
-- there), and may_analyze says whether this role may ANALYZE both tables
-- (it owns them, or has their owner's privileges: a member that inherits
-- them): the dispatcher describes
-- a table that has grown past its statistics itself.
WITH described AS (
    SELECT (SELECT c.reltuples FROM pg_catalog.pg_class c WHERE c.oid = 'switchyard.outbox'::regclass)::float8 AS outbox,
        (SELECT c.reltuples FROM pg_catalog.pg_class c WHERE c.oid = 'switchyard.outbox_aggregates'::regclass)::float8 AS aggregates
)
SELECT d.outbox, d.aggregates,
    pg_catalog.pg_relation_size('switchyard.outbox_aggregates'::regclass)::bigint AS aggregates_bytes,
    (CASE WHEN d.outbox < @floor::int
        THEN (SELECT count(*) FROM (SELECT FROM switchyard.outbox LIMIT @floor::int) o) ELSE 0 END)::int AS outbox_rows,
    (CASE WHEN d.aggregates < @floor::int
        THEN (SELECT count(*) FROM (SELECT FROM switchyard.outbox_aggregates LIMIT @floor::int) a) ELSE 0 END)::int AS aggregates_rows,
    (SELECT bool_and(pg_catalog.pg_has_role(c.relowner, 'USAGE')) FROM pg_catalog.pg_class c
        WHERE c.oid IN ('switchyard.outbox'::regclass, 'switchyard.outbox_aggregates'::regclass))::bool AS may_analyze
FROM described d;

-- name: OutboxAnalyze :exec
-- OutboxAnalyze describes the outbox to the planner now, rather than when
-- autovacuum next comes by (internal/outbox/plan.go). SKIP_LOCKED: if
-- autovacuum is at it already, this does nothing.
ANALYZE (SKIP_LOCKED) switchyard.outbox;

-- name: OutboxAggregatesAnalyze :exec
-- OutboxAggregatesAnalyze is OutboxAnalyze for the aggregates' table.
ANALYZE (SKIP_LOCKED) switchyard.outbox_aggregates;
