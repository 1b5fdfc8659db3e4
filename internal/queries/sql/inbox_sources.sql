-- switchyard.inbox_sources: configured inbound sources.

-- name: InboxSourceListNames :many
-- InboxSourceListNames names the configured sources and those seen in the
-- duplicate counters, for the source filter.
SELECT s.name FROM switchyard.inbox_sources s
UNION
SELECT DISTINCT d.source FROM switchyard.inbox_duplicates d
ORDER BY 1;

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

-- name: InboxSourceGet :one
SELECT * FROM switchyard.inbox_sources WHERE name = @name;

-- name: InboxSourceGetForUpdate :one
SELECT * FROM switchyard.inbox_sources WHERE name = @name FOR UPDATE;

-- name: InboxSourceInsert :execrows
-- InboxSourceInsert adds a source from the configuration page; 0 rows:
-- the name is taken.
INSERT INTO switchyard.inbox_sources (
    name, scheme, secret_refs, tolerance_seconds, out_of_order, handler, max_attempts,
    forward_to, entity_field, sql_function, disabled
) VALUES (
    @name, @scheme, @secret_refs, @tolerance_seconds, @out_of_order, @handler, @max_attempts,
    @forward_to, @entity_field, @sql_function, @disabled
)
ON CONFLICT (name) DO NOTHING;

-- name: InboxSourceUpdate :execrows
-- InboxSourceUpdate replaces a source's settings from the configuration
-- page; updated_at tells every receiver to reload it.
UPDATE switchyard.inbox_sources SET
    scheme = @scheme, secret_refs = @secret_refs, tolerance_seconds = @tolerance_seconds,
    out_of_order = @out_of_order, handler = @handler, max_attempts = @max_attempts,
    forward_to = @forward_to, entity_field = @entity_field, sql_function = @sql_function,
    disabled = @disabled, updated_at = now()
WHERE name = @name;

-- name: InboxSourceFunctionExists :one
-- InboxSourceFunctionExists reports whether fn (schema.function) names a
-- function taking (jsonb, jsonb), for the configuration page's check of a
-- 'sql' source. to_regprocedure returns NULL rather than raising.
SELECT (to_regprocedure(@fn::text || '(jsonb, jsonb)') IS NOT NULL)::boolean AS found;

-- name: InboxSourceForwardRename :execrows
-- InboxSourceForwardRename points the forward sources of a renamed
-- destination at its new name, in the rename's transaction.
UPDATE switchyard.inbox_sources SET forward_to = @new_name, updated_at = now() WHERE forward_to = @name;

-- name: InboxSourceUsage :one
-- InboxSourceUsage says what a source's rename or delete would leave
-- behind: its recorded events (the dedupe record of every event id it
-- took), those that wait for an operator (failed, parked, held), and
-- whether its duplicate counters have rows.
SELECT
    (SELECT count(*) FROM switchyard.inbox_events e WHERE e.source = @name)::bigint AS events,
    (SELECT count(*) FROM switchyard.inbox_events e WHERE e.source = @name AND e.status IN ('failed', 'parked', 'held'))::bigint AS waiting,
    EXISTS (SELECT 1 FROM switchyard.inbox_duplicates d WHERE d.source = @name) AS duplicates;

-- name: InboxSourceRename :execrows
UPDATE switchyard.inbox_sources SET name = @new_name, updated_at = now() WHERE name = @name;

-- name: InboxSourceDelete :execrows
DELETE FROM switchyard.inbox_sources WHERE name = @name;
