-- switchyard.inbox_events: the transactional inbox (internal/inbox) and its
-- console pages (EXPLAIN: internal/console/EXPLAIN_inbox.md).

-- name: InboxEventList :many
-- InboxEventList lists inbound events newest first after the keyset
-- cursor before_id (0: from the newest), optionally of one source and one
-- status. A status other than processed walks inbox_events_attention; all
-- or processed events walk the primary key backwards.
SELECT e.id, e.source, e.event_id, e.received_at, e.entity_key, e.entity_version,
    e.status, e.attempts, e.last_error, e.processed_at
FROM switchyard.inbox_events e
WHERE (@before_id::bigint = 0 OR e.id < @before_id::bigint)
  AND (@source::text = '' OR e.source = @source::text)
  AND (@status::text = '' OR e.status = @status::text)
ORDER BY e.id DESC
LIMIT @max_rows;

-- name: InboxEventListAttention :many
-- InboxEventListAttention is InboxEventList for a status that is not
-- processed, spelled so that the planner can use the partial index.
SELECT e.id, e.source, e.event_id, e.received_at, e.entity_key, e.entity_version,
    e.status, e.attempts, e.last_error, e.processed_at
FROM switchyard.inbox_events e
WHERE e.status = @status::text AND e.status <> 'processed'
  AND (@before_id::bigint = 0 OR e.id < @before_id::bigint)
  AND (@source::text = '' OR e.source = @source::text)
ORDER BY e.status, e.id DESC
LIMIT @max_rows;

-- name: InboxEventGet :one
SELECT e.id, e.source, e.event_id, e.received_at, e.headers, e.payload, e.entity_key,
    e.entity_version, e.status, e.attempts, e.last_error, e.error_fingerprint, e.processed_at
FROM switchyard.inbox_events e
WHERE e.id = @id;

-- name: InboxEventClaim :batchone
-- InboxEventClaim records an event as processed, in the transaction that
-- applies it. It returns no row for a duplicate, and adds one to the
-- source's duplicate counter (same statement: one round trip less on the
-- duplicate path). An event is a duplicate when it is already recorded
-- (processed, stale, held or parked), or when another transaction is
-- applying it right now, in which case the statement waits for that one to
-- end first. A failed event is taken again: a redelivery retries it.
WITH claimed AS (
    INSERT INTO switchyard.inbox_events (
        source, event_id, headers, payload, entity_key, entity_version, status, processed_at
    ) VALUES (
        @source, @event_id, @headers, @payload, @entity_key, sqlc.narg(entity_version), 'processed', now()
    )
    ON CONFLICT (source, event_id) DO UPDATE SET status = 'processed', processed_at = now()
        WHERE inbox_events.status = 'failed'
    RETURNING id, attempts
), duplicate AS (
    INSERT INTO switchyard.inbox_duplicates AS d (source, slot, count)
    SELECT @source, @slot::smallint, 1 WHERE NOT EXISTS (SELECT 1 FROM claimed)
    ON CONFLICT (source, slot) DO UPDATE SET count = d.count + 1, updated_at = now()
), duplicate_delivery AS (
    -- The event's own record of the duplicate, for its page.
    INSERT INTO switchyard.inbox_event_duplicates (source, event_id)
    SELECT @source, @event_id WHERE NOT EXISTS (SELECT 1 FROM claimed)
)
SELECT id, attempts FROM claimed;

-- name: InboxEventSettle :exec
-- InboxEventSettle records a claimed event that was not applied: stale or
-- held.
UPDATE switchyard.inbox_events SET status = @status, processed_at = now() WHERE id = @id;

-- name: InboxEventFail :one
-- InboxEventFail records a failed attempt of an event whose handler failed
-- (in a transaction of its own, after the applying one rolled back), or of
-- a held event whose handler failed when its predecessor was applied. The
-- event is parked once it has failed max_attempts times. It changes
-- nothing, and returns no row, if the event was meanwhile processed or
-- settled by another delivery. The failure goes to the change feed
-- (migrations/00005_changes.sql) and the event's attempts
-- (inbox_event_attempts) in the same statement.
WITH failed AS (
    INSERT INTO switchyard.inbox_events (
        source, event_id, headers, payload, entity_key, entity_version, status, attempts, last_error, error_fingerprint
    ) VALUES (
        @source, @event_id, @headers, @payload, @entity_key, sqlc.narg(entity_version),
        CASE WHEN @max_attempts::integer <= 1 THEN 'parked' ELSE 'failed' END, 1, @last_error, @error_fingerprint
    )
    ON CONFLICT (source, event_id) DO UPDATE SET
        attempts = inbox_events.attempts + 1,
        last_error = EXCLUDED.last_error,
        error_fingerprint = EXCLUDED.error_fingerprint,
        status = CASE WHEN inbox_events.attempts + 1 >= @max_attempts::integer THEN 'parked' ELSE 'failed' END,
        processed_at = NULL
        WHERE inbox_events.status IN ('failed', 'held')
    RETURNING id, source, event_id, status, attempts, last_error
),
attempt AS (
    INSERT INTO switchyard.inbox_event_attempts (inbox_event_id, attempt, outcome, error)
    SELECT f.id, (SELECT CASE WHEN f.attempts > coalesce(max(a.attempt), 0) THEN f.attempts ELSE coalesce(max(a.attempt), 0) + 1 END
        FROM switchyard.inbox_event_attempts a WHERE a.inbox_event_id = f.id), f.status, f.last_error FROM failed f
),
feed AS (
    INSERT INTO switchyard.changes (kind, subject, payload)
    SELECT 'inbox_failure', left(f.source || '/' || f.event_id, 512), jsonb_build_object('source', f.source, 'state', f.status)
    FROM failed f
)
SELECT status, attempts FROM failed;

-- name: InboxEventGetNextHeld :one
-- InboxEventGetNextHeld returns, locked, the held event of an entity with the
-- given version, if one is waiting.
SELECT id, event_id, headers, payload, entity_version FROM switchyard.inbox_events
WHERE source = @source AND entity_key = @entity_key AND entity_version = @version::bigint AND status = 'held'
ORDER BY id
LIMIT 1
FOR UPDATE;

-- name: InboxEventMarkProcessed :exec
UPDATE switchyard.inbox_events SET status = 'processed', processed_at = now() WHERE id = @id;

-- name: InboxHandlerCall :exec
-- InboxHandlerCall runs a 'sql' source's function in the receiving transaction
-- (switchyard.inbox_call validates and quotes the name) and links the
-- event @inbox_event_id, unless null, to the outbox rows the function wrote.
SELECT switchyard.inbox_call(@fn::text, @event::jsonb, @headers::jsonb, sqlc.narg(inbox_event_id)::bigint);

-- name: InboxEventPrune :execrows
-- InboxEventPrune deletes settled inbox events (processed, or stale: a
-- newer version was applied) received more than @age_seconds ago. Failed,
-- parked and held events are never deleted here: they wait for an
-- operator or for their predecessor.
-- Their duplicate deliveries go with them (their attempts and messages
-- by the foreign keys' cascade).
WITH doomed AS (
    SELECT e.id, e.source, e.event_id FROM switchyard.inbox_events e
    WHERE e.status IN ('processed', 'stale')
      AND e.received_at < now() - make_interval(secs => @age_seconds::float8)
    ORDER BY e.id
    LIMIT @batch_size
), duplicates AS (
    DELETE FROM switchyard.inbox_event_duplicates d
    USING doomed
    WHERE d.source = doomed.source AND d.event_id = doomed.event_id
)
DELETE FROM switchyard.inbox_events e
WHERE e.id IN (SELECT doomed.id FROM doomed)
AND e.status IN ('processed', 'stale');

-- name: InboxEventLockForRetry :one
-- InboxEventLockForRetry reads an event for an operator's retry and locks
-- it until the retry's transaction ends: a delivery of the same event
-- (its claim) and a second retry wait for it.
SELECT e.id, e.source, e.event_id, e.headers, e.payload, e.entity_key, e.entity_version,
    e.status, e.attempts
FROM switchyard.inbox_events e
WHERE e.id = @id
FOR UPDATE;

-- name: InboxEventRetryFail :one
-- InboxEventRetryFail records an operator's retry whose handler failed: one
-- more attempt, its error, the attempt's row (with the actor and the
-- request id), and a change for the pages. A parked event stays parked; a
-- failed one is parked once it has failed max_attempts times. An attempt's
-- number follows the event's failed attempts (rows recorded before the
-- attempts were kept have none).
WITH failed AS (
    UPDATE switchyard.inbox_events e SET
        attempts = e.attempts + 1,
        last_error = @last_error,
        error_fingerprint = @error_fingerprint,
        status = CASE WHEN e.status = 'parked' OR e.attempts + 1 >= @max_attempts::integer THEN 'parked' ELSE 'failed' END,
        processed_at = NULL
    WHERE e.id = @id AND e.status IN ('failed', 'parked')
    RETURNING e.id, e.source, e.event_id, e.status, e.attempts, e.last_error
),
attempt AS (
    INSERT INTO switchyard.inbox_event_attempts (inbox_event_id, attempt, outcome, error, actor, request_id)
    SELECT f.id, (SELECT CASE WHEN f.attempts > coalesce(max(a.attempt), 0) THEN f.attempts ELSE coalesce(max(a.attempt), 0) + 1 END
        FROM switchyard.inbox_event_attempts a WHERE a.inbox_event_id = f.id), f.status, f.last_error, @actor, @request_id FROM failed f
    RETURNING attempt
),
feed AS (
    INSERT INTO switchyard.changes (kind, subject, payload)
    SELECT 'inbox_failure', left(f.source || '/' || f.event_id, 512), jsonb_build_object('source', f.source, 'state', f.status)
    FROM failed f
)
SELECT f.status, f.attempts, a.attempt FROM failed f, attempt a;

-- name: InboxEventCallOnce :one
-- InboxEventCallOnce receives an event of a 'sql' source (one without an
-- entity version) in one statement, run on its own (its implicit
-- transaction is the event's): InboxEventClaim and InboxHandlerCall
-- above, fused, where the general path takes three round trips (the claim
-- with its BEGIN, the call, the COMMIT). event_row is the recorded
-- event's id, its function called (and the messages it enqueued linked
-- to it); or 0 for a duplicate, counted as InboxEventClaim counts one. A
-- function that raises fails the statement, and with it the claim:
-- nothing is written, and the general path records the failure.
WITH claimed AS (
    INSERT INTO switchyard.inbox_events (source, event_id, headers, payload, entity_key, status, processed_at)
    VALUES (@source::text, @event_id::text, @event_headers::json, @event_payload::json, '', 'processed', now())
    ON CONFLICT (source, event_id) DO UPDATE SET status = 'processed', processed_at = now()
        WHERE inbox_events.status = 'failed'
    RETURNING id
), duplicate AS (
    INSERT INTO switchyard.inbox_duplicates AS d (source, slot, count)
    SELECT @source::text, @slot::smallint, 1 WHERE NOT EXISTS (SELECT 1 FROM claimed)
    ON CONFLICT (source, slot) DO UPDATE SET count = d.count + 1, updated_at = now()
), duplicate_delivery AS (
    INSERT INTO switchyard.inbox_event_duplicates (source, event_id)
    SELECT @source::text, @event_id::text WHERE NOT EXISTS (SELECT 1 FROM claimed)
), called AS (
    SELECT switchyard.inbox_call(@fn::text, @event_payload::jsonb, @event_headers::jsonb, c.id) FROM claimed c
)
SELECT coalesce((SELECT id FROM claimed), 0)::bigint AS event_row, (SELECT count(*) FROM called)::bigint AS calls;
