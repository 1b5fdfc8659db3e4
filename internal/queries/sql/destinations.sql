-- switchyard.destinations: where messages go (internal/destination/registry).

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

-- name: DestinationListKnown :many
SELECT name FROM switchyard.destinations WHERE name = ANY (@names::text[]);

-- name: DestinationGet :one
SELECT * FROM switchyard.destinations WHERE name = @name;

-- name: DestinationGetForUpdate :one
-- DestinationGetForUpdate locks a destination's row for an edit, so that
-- two admins' saves of one destination take turns and each records the
-- row it replaced.
SELECT * FROM switchyard.destinations WHERE name = @name FOR UPDATE;

-- name: DestinationInsert :execrows
-- DestinationInsert adds a destination from the configuration page; 0
-- rows: the name is taken.
INSERT INTO switchyard.destinations (
    name, kind, address, secret_ref, secret_refs, retry_base_ms, retry_cap_ms, max_attempts,
    timeout_ms, rate_per_second, burst, concurrency,
    breaker_failure_ratio, breaker_min_requests, breaker_open_ms, permanent_statuses, disabled
) VALUES (
    @name, @kind, @address, @secret_ref, @secret_refs, @retry_base_ms, @retry_cap_ms, @max_attempts,
    @timeout_ms, @rate_per_second, @burst, @concurrency,
    @breaker_failure_ratio, @breaker_min_requests, @breaker_open_ms, @permanent_statuses, @disabled
)
ON CONFLICT (name) DO NOTHING;

-- name: DestinationUpdate :execrows
-- DestinationUpdate replaces a destination's settings from the
-- configuration page; updated_at tells every dispatcher to rebuild it.
UPDATE switchyard.destinations SET
    kind = @kind, address = @address, secret_ref = @secret_ref, secret_refs = @secret_refs,
    retry_base_ms = @retry_base_ms, retry_cap_ms = @retry_cap_ms, max_attempts = @max_attempts,
    timeout_ms = @timeout_ms, rate_per_second = @rate_per_second, burst = @burst,
    concurrency = @concurrency, breaker_failure_ratio = @breaker_failure_ratio,
    breaker_min_requests = @breaker_min_requests, breaker_open_ms = @breaker_open_ms,
    permanent_statuses = @permanent_statuses, disabled = @disabled, updated_at = now()
WHERE name = @name;

-- name: DestinationUsage :one
-- DestinationUsage says what still names a destination, for a rename or
-- delete from the configuration page: its messages by state, the forward
-- sources that enqueue to it and the reconciliation checks that repair
-- through it. The delivered count reads the table (no index serves
-- delivered rows by destination): an admin's rare action, like the
-- delete of the settled messages that follows. dead is the stored state: the
-- console's dead and replayed (switchyard.console_messages' status), both
-- of which an operator may still replay.
SELECT
    (SELECT count(*) FROM switchyard.outbox o WHERE o.destination = @name AND o.state = 'pending')::bigint AS pending,
    (SELECT count(*) FROM switchyard.outbox o WHERE o.destination = @name AND o.state = 'dead')::bigint AS dead,
    (SELECT count(*) FROM switchyard.outbox o WHERE o.destination = @name AND o.state IN ('delivered', 'discarded'))::bigint AS settled,
    coalesce((SELECT array_agg(s.name ORDER BY s.name) FROM switchyard.inbox_sources s
        WHERE s.handler = 'forward' AND s.forward_to = @name), '{}')::text[] AS forwarding_sources,
    coalesce((SELECT array_agg(c.name ORDER BY c.name) FROM switchyard.reconcile_checks c
        WHERE c.destination = @name), '{}')::text[] AS reconcile_checks;

-- name: DestinationRename :execrows
-- DestinationRename renames a destination that no message names (its
-- check follows: ON UPDATE CASCADE).
UPDATE switchyard.destinations SET name = @new_name, updated_at = now() WHERE name = @name;

-- name: DestinationDeleteSettled :execrows
-- DestinationDeleteSettled deletes the delivered and discarded messages
-- of a destination being deleted (their attempts go with them), so that
-- its row can go (the trigger on destinations refuses while a message
-- names it).
DELETE FROM switchyard.outbox WHERE destination = @name AND state IN ('delivered', 'discarded');

-- name: DestinationDelete :execrows
-- DestinationDelete deletes a destination with its aggregates'
-- bookkeeping; its check goes with it (ON DELETE CASCADE).
WITH aggregates AS (
    DELETE FROM switchyard.outbox_aggregates WHERE destination = @name
)
DELETE FROM switchyard.destinations WHERE name = @name;

-- name: DestinationLockEnqueues :exec
-- DestinationLockEnqueues waits, at most 5 s, for the enqueues to
-- destination name in progress and holds off new ones until this
-- transaction ends (00022): taken before a removal or rename counts the
-- destination's messages.
SELECT switchyard.destination_lock_enqueues(@name::text, 5000);
