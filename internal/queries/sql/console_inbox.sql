-- The console's inbox pages. EXPLAIN: internal/console/EXPLAIN_inbox.md.

-- name: ConsoleInboxList :many
-- ConsoleInboxList lists inbound events newest first after the keyset
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

-- name: ConsoleInboxListAttention :many
-- ConsoleInboxListAttention is ConsoleInboxList for a status that is not
-- processed, spelled so that the planner can use the partial index.
SELECT e.id, e.source, e.event_id, e.received_at, e.entity_key, e.entity_version,
    e.status, e.attempts, e.last_error, e.processed_at
FROM switchyard.inbox_events e
WHERE e.status = @status::text AND e.status <> 'processed'
  AND (@before_id::bigint = 0 OR e.id < @before_id::bigint)
  AND (@source::text = '' OR e.source = @source::text)
ORDER BY e.status, e.id DESC
LIMIT @max_rows;

-- name: ConsoleInboxEventGet :one
SELECT e.id, e.source, e.event_id, e.received_at, e.headers, e.payload, e.entity_key,
    e.entity_version, e.status, e.attempts, e.last_error, e.error_fingerprint, e.processed_at
FROM switchyard.inbox_events e
WHERE e.id = @id;

-- name: ConsoleInboxSources :many
-- ConsoleInboxSources names the configured sources and those seen in the
-- duplicate counters, for the source filter.
SELECT s.name FROM switchyard.inbox_sources s
UNION
SELECT DISTINCT d.source FROM switchyard.inbox_duplicates d
ORDER BY 1;

-- name: ConsoleInboxDuplicates :many
SELECT d.source, sum(d.count)::bigint AS duplicates, max(d.updated_at)::timestamptz AS last_at
FROM switchyard.inbox_duplicates d
GROUP BY d.source
ORDER BY d.source;
