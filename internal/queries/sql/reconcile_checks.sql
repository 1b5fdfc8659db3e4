-- switchyard.reconcile_checks: reconciliation checks as rows, their runner
-- lease, and the delivery check's reads (internal/reconcile). The one query
-- sqlc cannot serve, a table check's keyset page over a table named in a
-- row, is internal/reconcile's own.

-- name: ReconcileCheckInsert :one
-- ReconcileCheckInsert adds a check (the console's configuration and tests).
INSERT INTO switchyard.reconcile_checks (
    name, kind, batch_size, remote_rate, timeout_ms, interval_ms, remote_url, destination, topic,
    window_ms, table_schema, table_name, key_column, columns, lease_ms
) VALUES (
    @name, @kind, @batch_size, @remote_rate, @timeout_ms, @interval_ms, @remote_url, @destination, @topic,
    @window_ms, @table_schema, @table_name, @key_column, @columns::text[], @lease_ms
) RETURNING id;

-- name: ReconcileCheckGet :one
SELECT * FROM switchyard.reconcile_checks WHERE id = @id;

-- name: ReconcileCheckByName :one
SELECT * FROM switchyard.reconcile_checks WHERE name = @name;

-- name: ReconcileCheckLease :one
-- ReconcileCheckLease takes the lease of one due check nobody holds (its
-- lease expired or was released). A running cycle's check stays due (only
-- finishing a cycle or a failure moves next_cycle_at on), so a cycle whose
-- runner died is resumed by the next runner that leases it. The new
-- lease_version is the fencing token every later write of the runner
-- names.
UPDATE switchyard.reconcile_checks k
SET lease_owner = @owner::text, lease_version = k.lease_version + 1,
    lease_expires_at = now() + make_interval(secs => k.lease_ms / 1000.0)
WHERE k.id = (
    SELECT c.id FROM switchyard.reconcile_checks c
    WHERE c.enabled AND (c.lease_expires_at IS NULL OR c.lease_expires_at < now()) AND c.next_cycle_at <= now()
    ORDER BY c.next_cycle_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING k.*;

-- name: ReconcileCheckRelease :exec
-- ReconcileCheckRelease gives the lease back. done: the cycle ended, the
-- next one is due interval_ms from now; otherwise in delay_ms (0: at
-- once, for the next runner after a stop; more after a failure, so that a
-- failing check is not retried in a tight loop).
UPDATE switchyard.reconcile_checks
SET lease_owner = NULL, lease_expires_at = NULL,
    next_cycle_at = CASE WHEN @done::boolean THEN now() + make_interval(secs => interval_ms / 1000.0)
                         ELSE now() + (sqlc.arg(delay_ms)::bigint * interval '1 millisecond') END
WHERE id = @id AND lease_version = @lease_version;

-- name: ReconcileCheckRunNow :exec
-- ReconcileCheckRunNow makes a check's next cycle due now.
UPDATE switchyard.reconcile_checks SET next_cycle_at = now() WHERE id = @id;

-- name: ReconcileDeliveryBoundsGet :one
-- ReconcileDeliveryBoundsGet is a delivery check's key space at cycle start:
-- the messages delivered to destination since, up to the latest delivery
-- (by finished_at, then id: the keyset order of outbox_finished_id, which
-- reads the window's deliveries, not the history before it).
SELECT b.estimate, b.upper_finished_at,
    coalesce((SELECT max(o.id) FROM switchyard.outbox o WHERE o.destination = @destination
        AND o.state = 'delivered' AND o.finished_at = b.upper_finished_at), 0)::bigint AS upper_id
FROM (
    SELECT count(*)::bigint AS estimate, coalesce(max(finished_at), @since)::timestamptz AS upper_finished_at
    FROM switchyard.outbox
    WHERE destination = @destination AND state = 'delivered' AND finished_at >= @since
) b;

-- name: ReconcileDeliveryListPage :many
-- ReconcileDeliveryListPage is the next keyset page of a delivery check: the
-- idempotency key each message was delivered with, by (finished_at, id)
-- after the cursor and up to the cycle's upper bound.
SELECT id, finished_at::timestamptz AS finished_at, coalesce(delivery_key, message_id) AS key
FROM switchyard.outbox
WHERE destination = @destination AND state = 'delivered' AND finished_at >= @since
  AND (finished_at, id) > (@after_finished_at::timestamptz, @after_id::bigint)
  AND (finished_at, id) <= (@upper_finished_at::timestamptz, @upper_id::bigint)
ORDER BY finished_at, id
LIMIT @batch_size;

-- name: ReconcileCheckListSummaries :many
-- ReconcileCheckListSummaries lists every check with its newest cycle and its
-- open drift (counted through the partial index, capped at 10,001).
SELECT k.id, k.name, k.kind, k.enabled, k.next_cycle_at, k.interval_ms, k.remote_rate, k.batch_size,
    coalesce(y.id, 0)::bigint AS cycle_id, coalesce(y.state, '')::text AS cycle_state,
    coalesce(y.started_at, k.created_at) AS started_at, y.finished_at, coalesce(y.updated_at, k.created_at) AS updated_at,
    coalesce(y.estimate, 0)::bigint AS estimate, coalesce(y.examined, 0)::bigint AS examined,
    coalesce(y.missing_remote, 0)::bigint AS missing_remote, coalesce(y.missing_local, 0)::bigint AS missing_local,
    coalesce(y.mismatch, 0)::bigint AS mismatch, coalesce(y.unknown, 0)::bigint AS unknown,
    (SELECT count(*) FROM (
        SELECT 1 FROM switchyard.reconcile_findings f
        WHERE f.check_id = k.id AND f.status IN ('open', 'repair_requested') LIMIT 10001
    ) o)::bigint AS open_findings
FROM switchyard.reconcile_checks k
LEFT JOIN LATERAL (
    SELECT * FROM switchyard.reconcile_cycles c WHERE c.check_id = k.id ORDER BY c.id DESC LIMIT 1
) y ON true
ORDER BY k.name;

-- name: ReconcileCheckUpsert :exec
-- ReconcileCheckUpsert writes a check by name, keeping its cycles and
-- findings: `console demo` points its checks at the provider it started.
INSERT INTO switchyard.reconcile_checks (
    name, kind, batch_size, remote_rate, timeout_ms, interval_ms, remote_url, destination, topic,
    window_ms, table_schema, table_name, key_column, columns, lease_ms
) VALUES (
    @name, @kind, @batch_size, @remote_rate, @timeout_ms, @interval_ms, @remote_url, @destination, @topic,
    @window_ms, @table_schema, @table_name, @key_column, @columns::text[], @lease_ms
)
ON CONFLICT (name) DO UPDATE SET remote_url = excluded.remote_url, interval_ms = excluded.interval_ms,
    next_cycle_at = now();
