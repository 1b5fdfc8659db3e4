-- The transactional inbox. See migrations/00005_inbox.sql for the design
-- and internal/inbox for the transaction that uses these.

-- name: InboxSourceUpsert :exec
INSERT INTO switchyard.inbox_sources (
    name, scheme, secret_refs, tolerance_seconds, out_of_order, handler, max_attempts
) VALUES (
    @name, @scheme, @secret_refs, @tolerance_seconds, @out_of_order, @handler, @max_attempts
)
ON CONFLICT (name) DO UPDATE SET
    scheme = EXCLUDED.scheme, secret_refs = EXCLUDED.secret_refs,
    tolerance_seconds = EXCLUDED.tolerance_seconds, out_of_order = EXCLUDED.out_of_order,
    handler = EXCLUDED.handler, max_attempts = EXCLUDED.max_attempts, updated_at = now();

-- name: InboxSourceList :many
SELECT * FROM switchyard.inbox_sources ORDER BY name;

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
-- (migrations/00006_changefeed.sql) in the same statement.
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
    RETURNING source, event_id, status, attempts
),
feed AS (
    INSERT INTO switchyard.changes (kind, subject, payload)
    SELECT 'inbox_failure', left(f.source || '/' || f.event_id, 512), jsonb_build_object('source', f.source, 'state', f.status)
    FROM failed f
)
SELECT status, attempts FROM failed;

-- name: InboxEntityVersionLock :one
-- InboxEntityVersionLock returns the entity's applied version (0: none
-- yet) and locks its row until the transaction ends, so that the events of
-- one entity are applied one at a time.
INSERT INTO switchyard.inbox_entity_versions AS v (source, entity_key, version)
VALUES (@source, @entity_key, 0)
ON CONFLICT (source, entity_key) DO UPDATE SET version = v.version
RETURNING version;

-- name: InboxEntityVersionSet :exec
UPDATE switchyard.inbox_entity_versions SET version = @version, updated_at = now()
WHERE source = @source AND entity_key = @entity_key;

-- name: InboxEventHeldNext :one
-- InboxEventHeldNext returns, locked, the held event of an entity with the
-- given version, if one is waiting.
SELECT id, event_id, headers, payload, entity_version FROM switchyard.inbox_events
WHERE source = @source AND entity_key = @entity_key AND entity_version = @version::bigint AND status = 'held'
ORDER BY id
LIMIT 1
FOR UPDATE;

-- name: InboxEventMarkProcessed :exec
UPDATE switchyard.inbox_events SET status = 'processed', processed_at = now() WHERE id = @id;

-- name: InboxDuplicateTotal :one
SELECT coalesce(sum(count), 0)::bigint FROM switchyard.inbox_duplicates WHERE source = @source;

-- name: InboxCall :exec
-- InboxCall runs a 'sql' source's function in the receiving transaction
-- (switchyard.inbox_call validates and quotes the name).
SELECT switchyard.inbox_call(@fn::text, @event::jsonb, @headers::jsonb);
