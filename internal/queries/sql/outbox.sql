-- The outbox's hot path: claim, extend, finalize. See migrations/00002_outbox.sql
-- for the design; EXPLAIN output for the claims is in internal/outbox/EXPLAIN.md.

-- name: DestinationUpsert :exec
INSERT INTO switchyard.destinations (
    name, kind, address, secret_ref, retry_base_ms, retry_cap_ms, max_attempts,
    timeout_ms, rate_per_second, burst, concurrency,
    breaker_failure_ratio, breaker_min_requests, breaker_open_ms
) VALUES (
    @name, @kind, @address, @secret_ref, @retry_base_ms, @retry_cap_ms, @max_attempts,
    @timeout_ms, @rate_per_second, @burst, @concurrency,
    @breaker_failure_ratio, @breaker_min_requests, @breaker_open_ms
)
ON CONFLICT (name) DO UPDATE SET
    kind = EXCLUDED.kind, address = EXCLUDED.address, secret_ref = EXCLUDED.secret_ref,
    retry_base_ms = EXCLUDED.retry_base_ms, retry_cap_ms = EXCLUDED.retry_cap_ms,
    max_attempts = EXCLUDED.max_attempts, timeout_ms = EXCLUDED.timeout_ms,
    rate_per_second = EXCLUDED.rate_per_second, burst = EXCLUDED.burst,
    concurrency = EXCLUDED.concurrency, breaker_failure_ratio = EXCLUDED.breaker_failure_ratio,
    breaker_min_requests = EXCLUDED.breaker_min_requests, breaker_open_ms = EXCLUDED.breaker_open_ms,
    updated_at = now();

-- name: DestinationList :many
SELECT * FROM switchyard.destinations ORDER BY name;

-- name: OutboxInsert :one
INSERT INTO switchyard.outbox (
    message_id, topic, destination, aggregate_type, aggregate_id, payload, headers, max_attempts, replay_of
) VALUES (
    @message_id, @topic, @destination, @aggregate_type, @aggregate_id, @payload, @headers, @max_attempts, @replay_of
)
RETURNING id;

-- name: OutboxClaimUnordered :many
-- OutboxClaimUnordered leases up to batch_size due messages that have no
-- aggregate: at most caps[n] of destinations[n], so that a destination with
-- no free delivery slots cannot fill the dispatcher's window with messages
-- that would only wait. The lease is next_attempt_at moved to the lease's
-- expiry and lease_version + 1.
WITH due AS (
    SELECT c.id
    FROM generate_series(1, cardinality(@destinations::text[])) AS n
    CROSS JOIN LATERAL (
        SELECT o.id FROM switchyard.outbox o
        WHERE o.state = 'pending' AND o.aggregate_id = ''
          AND o.destination = (@destinations::text[])[n]
          AND o.next_attempt_at <= coalesce(sqlc.narg(now)::timestamptz, now())
        ORDER BY o.next_attempt_at
        LIMIT (@caps::int[])[n]
        FOR UPDATE SKIP LOCKED
    ) c
    LIMIT @batch_size
)
UPDATE switchyard.outbox o
SET lease_owner = @owner::text,
    lease_version = o.lease_version + 1,
    next_attempt_at = coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => @lease_seconds::float8),
    attempts = o.attempts + 1
FROM due
WHERE o.id = due.id
RETURNING o.id, coalesce(o.delivery_key, o.message_id)::uuid AS message_id, o.topic, o.destination, o.aggregate_type, o.aggregate_id,
    o.payload, o.headers, o.attempts, o.max_attempts, o.lease_version, o.created_at;

-- name: OutboxClaimOrdered :many
-- OutboxClaimOrdered leases up to aggregates due aggregates (see
-- migrations/00004_leased_aggregates.sql), at most caps[n] of
-- destinations[n] as in OutboxClaimUnordered, and, in each, its first
-- per_aggregate pending messages in aggregate_seq order; one worker delivers
-- them in that order. The aggregate's lease (due_at = expiry, lease_version
-- + 1) keeps every other worker off its later messages until the finalize.
-- Lock order, here and in OutboxFinalize: the aggregate row, then its
-- messages.
WITH due AS (
    SELECT c.destination, c.aggregate_type, c.aggregate_id
    FROM generate_series(1, cardinality(@destinations::text[])) AS n
    CROSS JOIN LATERAL (
        SELECT a.destination, a.aggregate_type, a.aggregate_id
        FROM switchyard.outbox_aggregates a
        WHERE a.last_seq > a.done_seq
          AND a.destination = (@destinations::text[])[n]
          AND a.due_at <= coalesce(sqlc.narg(now)::timestamptz, now())
        ORDER BY a.due_at
        LIMIT (@caps::int[])[n]
        FOR UPDATE SKIP LOCKED
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
heads AS (
    SELECT m.id, l.lease_version, m.n = 1 AS head
    FROM leased l
    CROSS JOIN LATERAL (
        SELECT o.id, row_number() OVER (ORDER BY o.aggregate_seq) AS n FROM switchyard.outbox o
        WHERE o.state = 'pending' AND o.aggregate_id <> ''
          AND o.destination = l.destination AND o.aggregate_type = l.aggregate_type AND o.aggregate_id = l.aggregate_id
        ORDER BY o.aggregate_seq
        LIMIT @per_aggregate
    ) m
)
-- Only the first message of each aggregate counts its attempt here (so a
-- message that crashes its dispatcher still runs out of attempts); the
-- others count theirs at finalize, if they were tried: a lost finalize or
-- lease must not burn attempts of messages that were never sent.
UPDATE switchyard.outbox o
SET lease_owner = @owner::text,
    lease_version = o.lease_version + 1,
    attempts = o.attempts + CASE WHEN heads.head THEN 1 ELSE 0 END
FROM heads
WHERE o.id = heads.id AND o.state = 'pending'
RETURNING o.id, coalesce(o.delivery_key, o.message_id)::uuid AS message_id, o.topic, o.destination, o.aggregate_type, o.aggregate_id,
    o.payload, o.headers, o.attempts, o.max_attempts, o.lease_version, o.created_at,
    o.aggregate_seq::bigint AS aggregate_seq, heads.lease_version AS aggregate_lease_version, heads.head::boolean AS counted;

-- name: OutboxExtendLeases :many
-- OutboxExtendLeases is the heartbeat of deliveries in flight: it pushes the
-- lease expiry of each (id, lease_version) still held, and returns the ids
-- it extended; a missing one has lost its lease.
UPDATE switchyard.outbox o
SET next_attempt_at = coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => @lease_seconds::float8)
FROM (
    SELECT (@ids::bigint[])[n] AS id, (@lease_versions::bigint[])[n] AS lease_version
    FROM generate_series(1, cardinality(@ids::bigint[])) AS n
) AS l
WHERE o.id = l.id AND o.lease_version = l.lease_version AND o.state = 'pending'
RETURNING o.id;

-- name: OutboxExtendAggregateLeases :many
-- OutboxExtendAggregateLeases is the heartbeat of aggregates in flight (their
-- messages' leases are the aggregate's). It never waits: an aggregate row
-- that an enqueuing transaction holds (its trigger numbers the messages) is
-- skipped and reported 'busy', one whose lease was taken over 'lost'.
-- Waiting there could hold the dispatcher for as long as any business
-- transaction, or deadlock with one.
WITH input AS (
    SELECT (@destinations::text[])[n] AS destination,
        (@aggregate_types::text[])[n] AS aggregate_type,
        (@aggregate_ids::text[])[n] AS aggregate_id,
        (@lease_versions::bigint[])[n] AS lease_version
    FROM generate_series(1, cardinality(@destinations::text[])) AS n
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
    -- Parallel arrays, one element per message: sqlc cannot type a
    -- multi-argument unnest, so the rows are assembled by subscript.
    SELECT (@ids::bigint[])[n] AS id,
        (@lease_versions::bigint[])[n] AS lease_version,
        -- The message's aggregate: its position in the aggregate_ arrays,
        -- 0 for a message without one.
        (@aggregate_of::int[])[n] AS aggregate_of,
        (@attempt_numbers::int[])[n] AS attempt,
        (@outcomes::text[])[n] AS outcome,
        (@retry_delays_ms::float8[])[n] AS retry_delay_ms,
        (@attempt_deltas::int[])[n] AS attempt_delta,
        (@errors::text[])[n] AS error,
        (@fingerprints::text[])[n] AS fingerprint,
        (@status_codes::int[])[n] AS status_code,
        (@responses::text[])[n] AS response,
        (@started_ats::timestamptz[])[n] AS started_at,
        (@finished_ats::timestamptz[])[n] AS finished_at
    FROM generate_series(1, cardinality(@ids::bigint[])) AS n
),
aggregate_input AS (
    SELECT n AS position,
        (@aggregate_destinations::text[])[n] AS destination,
        (@aggregate_types::text[])[n] AS aggregate_type,
        (@aggregate_ids::text[])[n] AS aggregate_id,
        (@aggregate_lease_versions::bigint[])[n] AS lease_version,
        (@aggregate_done_seqs::bigint[])[n] AS done_seq,
        (@aggregate_due_in_ms::float8[])[n] AS due_in_ms,
        (@aggregate_blocked::boolean[])[n] AS blocked
    FROM generate_series(1, cardinality(@aggregate_destinations::text[])) AS n
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
    RETURNING a.destination, a.aggregate_type, a.aggregate_id
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
        last_error = CASE WHEN i.outcome = 'released' THEN o.last_error ELSE NULLIF(i.error, '') END,
        error_fingerprint = CASE WHEN i.outcome = 'released' THEN o.error_fingerprint ELSE NULLIF(i.fingerprint, '') END,
        finished_at = CASE WHEN i.outcome IN ('delivered', 'dead') THEN now() END
    FROM input i
    WHERE o.id = i.id AND o.lease_version = i.lease_version AND o.state = 'pending'
      -- An ordered message applies only under its aggregate's lease.
      AND (o.aggregate_id = '' OR EXISTS (
          SELECT 1 FROM aggregates g
          WHERE g.destination = o.destination AND g.aggregate_type = o.aggregate_type AND g.aggregate_id = o.aggregate_id))
    RETURNING o.id, o.state, o.destination, o.topic, o.aggregate_type, o.aggregate_id, o.created_at,
        coalesce(o.error_fingerprint, '') AS error_fingerprint, coalesce(o.last_error, '') AS last_error,
        o.replay_of, o.replay_job
),
attempts AS (
    INSERT INTO switchyard.outbox_attempts (
        message_id, attempt, worker, lease_version, started_at, finished_at,
        outcome, applied, status_code, response, error, duration_ms)
    SELECT i.id, i.attempt, @worker::text, i.lease_version, i.started_at, i.finished_at,
        i.outcome, EXISTS (SELECT 1 FROM applied a WHERE a.id = i.id), NULLIF(i.status_code, 0),
        NULLIF(i.response, ''), NULLIF(i.error, ''),
        extract(epoch FROM i.finished_at - i.started_at) * 1000
    FROM input i
    WHERE i.outcome <> 'released' AND i.id NOT IN (SELECT b.id FROM busy b)
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
-- The change feed (migrations/00006_changefeed.sql): one row per group
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
    FROM applied a JOIN input i ON i.id = a.id
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
SELECT b.id, 'busy'::text FROM busy b;

-- name: OutboxBlockedAggregates :many
SELECT b.destination, b.aggregate_type, b.aggregate_id, b.dead_message_id, b.blocked_at,
    (SELECT count(*) FROM switchyard.outbox o
     WHERE o.state = 'pending' AND o.destination = b.destination
       AND o.aggregate_type = b.aggregate_type AND o.aggregate_id = b.aggregate_id) AS waiting
FROM switchyard.outbox_blocked_aggregates b
ORDER BY b.blocked_at, b.destination, b.aggregate_type, b.aggregate_id
LIMIT @max_rows;

-- name: DestinationKnown :many
SELECT name FROM switchyard.destinations WHERE name = ANY (@names::text[]);

-- name: DispatcherHeartbeat :exec
-- DispatcherHeartbeat registers a dispatcher or refreshes its row.
INSERT INTO switchyard.dispatchers (owner, host, pid, workers, leases_held)
VALUES (@owner, @host, @pid, @workers, @leases_held)
ON CONFLICT (owner) DO UPDATE SET
    leases_held = EXCLUDED.leases_held, heartbeat_at = now(), stopped_at = NULL;

-- name: DispatcherStopped :exec
UPDATE switchyard.dispatchers SET stopped_at = now(), leases_held = 0, heartbeat_at = now()
WHERE owner = @owner;

-- name: DispatcherList :many
SELECT owner, host, pid, workers, leases_held, started_at, heartbeat_at, stopped_at,
    extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age_seconds
FROM switchyard.dispatchers
ORDER BY stopped_at NULLS FIRST, started_at DESC
LIMIT @max_rows;

-- name: BreakerEventInsert :exec
-- BreakerEventInsert records a breaker's change of state and appends it to
-- the change feed in the same statement.
WITH event AS (
    INSERT INTO switchyard.breaker_events (destination, owner, from_state, to_state, changed_at)
    VALUES (@destination, @owner, @from_state, @to_state, @changed_at)
    RETURNING destination, owner, from_state, to_state
)
INSERT INTO switchyard.changes (kind, subject, payload)
SELECT 'breaker', e.destination, jsonb_build_object('from', e.from_state, 'to', e.to_state, 'owner', e.owner)
FROM event e;

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

-- name: OutboxPruneAttempts :execrows
DELETE FROM switchyard.outbox_attempts
WHERE id IN (
    SELECT a.id FROM switchyard.outbox_attempts a WHERE a.finished_at < @cutoff
    ORDER BY a.finished_at LIMIT @batch_size
);

-- name: OutboxAggregatesPrune :execrows
-- OutboxAggregatesPrune deletes aggregates that have had no work since the
-- cutoff. The next message of such an aggregate starts a new row at
-- sequence 1: only pending messages are ordered, and it has none.
DELETE FROM switchyard.outbox_aggregates
WHERE (destination, aggregate_type, aggregate_id) IN (
    SELECT a.destination, a.aggregate_type, a.aggregate_id FROM switchyard.outbox_aggregates a
    WHERE a.last_seq = a.done_seq AND a.due_at < @cutoff
    LIMIT @batch_size
)
-- Checked again on the row itself: an enqueue may have given it work since.
AND last_seq = done_seq;

-- name: DeadLetterHoursPrune :execrows
DELETE FROM switchyard.dead_letter_hours WHERE hour < @cutoff;

-- name: DeliveryStatsPrune :execrows
DELETE FROM switchyard.delivery_stats WHERE second < @cutoff;

-- name: DispatchersPrune :execrows
DELETE FROM switchyard.dispatchers WHERE heartbeat_at < @cutoff;

-- name: OutboxListen :exec
-- OutboxListen subscribes the process's LISTEN connection (internal/pglisten)
-- to the dispatchers' wake-up.
LISTEN switchyard_outbox;

-- name: OutboxNotify :exec
-- OutboxNotify wakes idle dispatchers. Never inside an enqueuing
-- transaction: see outbox.Notify.
SELECT pg_notify('switchyard_outbox', '');
