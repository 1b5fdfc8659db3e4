-- Reconciliation: checks, cycles, findings (migrations/00050_reconcile.sql,
-- internal/reconcile). The one query sqlc cannot serve, a table check's
-- keyset page over a table named in a row, is internal/reconcile/table.go.

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

-- name: ReconcileCycleRunning :one
SELECT * FROM switchyard.reconcile_cycles WHERE check_id = @check_id AND state = 'running';

-- name: ReconcileCycleStart :one
-- ReconcileCycleStart opens a cycle, fenced: nothing is written unless
-- lease_version is the check's. since is the start of a delivery check's
-- window. The caller sets the bounds in the same transaction.
INSERT INTO switchyard.reconcile_cycles (check_id, since)
SELECT k.id, now() - make_interval(secs => k.window_ms / 1000.0)
FROM switchyard.reconcile_checks k
WHERE k.id = @check_id AND k.lease_version = @lease_version
RETURNING *;

-- name: ReconcileCycleSetBounds :one
-- ReconcileCycleSetBounds fixes a new cycle's upper key (NULL: nothing to
-- walk) and estimate, in the transaction that started it.
UPDATE switchyard.reconcile_cycles SET upper_key = sqlc.narg(upper_key)::text, estimate = @estimate::bigint
WHERE id = @id
RETURNING *;

-- name: ReconcileCycleResume :one
-- ReconcileCycleResume counts one more runner taking over a running
-- cycle, fenced like every write of a runner.
UPDATE switchyard.reconcile_cycles y SET runs = y.runs + 1, updated_at = now()
FROM switchyard.reconcile_checks k
WHERE y.id = @id AND y.state = 'running' AND k.id = y.check_id AND k.lease_version = @lease_version
RETURNING y.*;

-- name: ReconcileCycleAdvance :one
-- ReconcileCycleAdvance records one batch: the cursor moves to cursor_key,
-- the counters grow, the ranges it could not check are appended to
-- unexamined, and the lease is renewed, in one statement, fenced: a runner
-- whose lease was taken over gets no row and must stop.
WITH lease AS (
    UPDATE switchyard.reconcile_checks k
    SET lease_expires_at = now() + make_interval(secs => k.lease_ms / 1000.0)
    WHERE k.id = @check_id AND k.lease_version = @lease_version
    RETURNING k.id
)
UPDATE switchyard.reconcile_cycles y
SET cursor_key = @cursor_key, updated_at = now(),
    examined = y.examined + @examined, in_sync = y.in_sync + @in_sync,
    missing_remote = y.missing_remote + @missing_remote, missing_local = y.missing_local + @missing_local,
    mismatch = y.mismatch + @mismatch, unknown = y.unknown + @unknown,
    remote_calls = y.remote_calls + @remote_calls,
    unexamined = y.unexamined || @unexamined::jsonb,
    last_error = CASE WHEN @last_error::text = '' THEN y.last_error ELSE @last_error::text END
FROM lease
WHERE y.id = @cycle_id AND y.check_id = lease.id AND y.state = 'running'
RETURNING y.*;

-- name: ReconcileCycleFinish :one
-- ReconcileCycleFinish ends a running cycle, fenced: complete when every
-- key was examined, incomplete when some range was not.
UPDATE switchyard.reconcile_cycles y
SET state = CASE WHEN y.unexamined = '[]'::jsonb THEN 'complete' ELSE 'incomplete' END,
    finished_at = now(), updated_at = now()
FROM switchyard.reconcile_checks k
WHERE y.id = @id AND y.state = 'running' AND k.id = y.check_id AND k.lease_version = @lease_version
RETURNING y.*;

-- name: ReconcileFindingsUpsert :one
-- ReconcileFindingsUpsert records what one batch found: keys[n] has drift
-- kinds[n] (ref: the message id of a delivery check; diff: a mismatch's
-- fields). A finding exists once per (check, key, kind): seen again, it
-- moves to this cycle; resolved before, it is reopened. Keys must be
-- distinct per kind within one call. History rows say opened/reopened.
WITH input AS (
    SELECT (@keys::text[])[n] AS key, (@kinds::text[])[n] AS kind,
        nullif((@refs::bigint[])[n], 0) AS ref, (@diffs::jsonb[])[n] AS diff
    FROM generate_series(1, cardinality(@keys::text[])) AS n
),
prior AS (
    SELECT f.id, f.status FROM switchyard.reconcile_findings f
    JOIN input i ON f.check_id = @check_id AND f.key = i.key AND f.kind = i.kind
),
up AS (
    INSERT INTO switchyard.reconcile_findings AS f (check_id, key, kind, ref, diff, first_cycle_id, last_cycle_id)
    SELECT @check_id, i.key, i.kind, i.ref, i.diff, @cycle_id, @cycle_id FROM input i
    ORDER BY i.key, i.kind
    ON CONFLICT (check_id, key, kind) DO UPDATE
    SET last_cycle_id = excluded.last_cycle_id, last_seen_at = now(), diff = excluded.diff, ref = excluded.ref,
        status = CASE WHEN f.status = 'resolved' THEN 'open' ELSE f.status END,
        resolved_at = CASE WHEN f.status = 'resolved' THEN NULL ELSE f.resolved_at END
    RETURNING f.id
),
ev AS (
    INSERT INTO switchyard.reconcile_finding_events (finding_id, cycle_id, event)
    SELECT up.id, @cycle_id, CASE WHEN p.id IS NULL THEN 'opened' ELSE 'reopened' END
    FROM up LEFT JOIN prior p ON p.id = up.id
    WHERE p.id IS NULL OR p.status = 'resolved'
    RETURNING event
)
SELECT count(*) FILTER (WHERE event = 'opened')::bigint AS opened,
    count(*) FILTER (WHERE event = 'reopened')::bigint AS reopened
FROM ev;

-- name: ReconcileFindingsResolveUnseen :execrows
-- ReconcileFindingsResolveUnseen resolves the check's open findings that
-- the complete cycle cycle_id no longer saw, with a history row each.
WITH resolved AS (
    UPDATE switchyard.reconcile_findings
    SET status = 'resolved', resolved_at = now()
    WHERE check_id = @check_id AND status IN ('open', 'repair_requested') AND last_cycle_id < @cycle_id::bigint
    RETURNING id
)
INSERT INTO switchyard.reconcile_finding_events (finding_id, cycle_id, event)
SELECT id, @cycle_id::bigint, 'resolved' FROM resolved;

-- name: ReconcileDeliveryBounds :one
-- ReconcileDeliveryBounds is a delivery check's key space at cycle start:
-- the messages delivered to destination since, up to the newest.
SELECT count(*)::bigint AS estimate, coalesce(max(id), 0)::bigint AS upper
FROM switchyard.outbox
WHERE destination = @destination AND state = 'delivered' AND finished_at >= @since;

-- name: ReconcileDeliveryPage :many
-- ReconcileDeliveryPage is the next keyset page of a delivery check: the
-- idempotency key each message was delivered with, by message id.
SELECT id, coalesce(delivery_key, message_id) AS key
FROM switchyard.outbox
WHERE destination = @destination AND state = 'delivered' AND finished_at >= @since
  AND id > @after AND id <= @upper
ORDER BY id
LIMIT @batch_size;

-- name: ReconcileFindingLock :one
-- ReconcileFindingLock locks a finding for an operator action (Repair,
-- Ignore: one at a time per finding) and returns it with its check.
SELECT f.id, f.check_id, f.key, f.kind, f.status, f.ref, f.last_cycle_id, f.repair_cycle_id, f.repair_message,
    k.name AS check_name, k.kind AS check_kind, k.destination, k.topic,
    k.table_schema, k.table_name, k.key_column, k.columns
FROM switchyard.reconcile_findings f
JOIN switchyard.reconcile_checks k ON k.id = f.check_id
WHERE f.id = @id
FOR UPDATE OF f;

-- name: ReconcileRedeliver :one
-- ReconcileRedeliver redelivers a delivered message as a replay with the
-- idempotency key it was delivered with (a repair of a delivery check's
-- missing_remote; the replay columns of migrations/00020_replays.sql).
-- The request id makes it happen once: a second call with the same one
-- inserts nothing and gets no row (ReconcileReplayByRequest finds it).
WITH ins AS (
    INSERT INTO switchyard.outbox (
        topic, destination, aggregate_type, aggregate_id, payload, headers, max_attempts,
        replay_of, delivery_key, replay_request, replay_mode, replay_actor, replay_reason, generation
    )
    SELECT o.topic, o.destination, o.aggregate_type, o.aggregate_id, o.payload, o.headers, o.max_attempts,
        o.id, coalesce(o.delivery_key, o.message_id), @request_id::uuid, 'redeliver', @actor::text, @reason::text, o.generation + 1
    FROM switchyard.outbox o
    WHERE o.id = @id AND o.state = 'delivered'
    ON CONFLICT (replay_request) WHERE replay_request IS NOT NULL DO NOTHING
    RETURNING outbox.id, outbox.delivery_key, outbox.replay_of
), marked AS (
    UPDATE switchyard.outbox o SET replays = o.replays + 1, replayed_at = now()
    FROM ins WHERE o.id = ins.replay_of
)
SELECT ins.id, ins.delivery_key FROM ins;

-- name: ReconcileReplayByRequest :one
SELECT id, coalesce(delivery_key, message_id)::uuid AS delivery_key
FROM switchyard.outbox WHERE replay_request = @request_id::uuid;

-- name: ReconcileFindingMark :exec
-- ReconcileFindingMark moves a finding to status after an operator
-- action, with its history row.
WITH marked AS (
    UPDATE switchyard.reconcile_findings
    SET status = @status::text,
        repair_cycle_id = coalesce(sqlc.narg(repair_cycle_id)::bigint, repair_cycle_id),
        repair_message = coalesce(sqlc.narg(repair_message)::bigint, repair_message)
    WHERE reconcile_findings.id = @finding_id::bigint
    RETURNING reconcile_findings.id AS marked_id
)
INSERT INTO switchyard.reconcile_finding_events (finding_id, cycle_id, event, actor, reason)
SELECT marked_id, sqlc.narg(repair_cycle_id)::bigint, @status::text, @actor::text, @reason::text FROM marked;

-- The console's Reconciliation pages (internal/console/reconciliation_*.go).

-- name: ReconcileCheckSummaries :many
-- ReconcileCheckSummaries lists every check with its newest cycle and its
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

-- name: ReconcileCyclesRecent :many
-- ReconcileCyclesRecent is the newest cycles of every check.
SELECT y.id, y.state, y.started_at, y.finished_at, y.estimate, y.examined, y.in_sync,
    y.missing_remote, y.missing_local, y.mismatch, y.unknown, y.runs, y.unexamined, k.name AS check_name
FROM switchyard.reconcile_cycles y
JOIN switchyard.reconcile_checks k ON k.id = y.check_id
ORDER BY y.id DESC
LIMIT @row_limit;

-- name: ReconcileFindingsPage :many
-- ReconcileFindingsPage is a page of findings, newest first, before
-- before_id (keyset), filtered by check name, kind and status ('' any;
-- 'active': open or repair_requested).
SELECT f.id, f.key, f.kind, f.status, f.first_seen_at, f.last_seen_at, k.name AS check_name
FROM switchyard.reconcile_findings f
JOIN switchyard.reconcile_checks k ON k.id = f.check_id
WHERE (@check_name::text = '' OR k.name = @check_name::text)
  AND (@kind::text = '' OR f.kind = @kind::text)
  AND CASE @status::text
        WHEN '' THEN true
        WHEN 'active' THEN f.status IN ('open', 'repair_requested')
        ELSE f.status = @status::text
      END
  AND f.id < @before_id
ORDER BY f.id DESC
LIMIT @row_limit;

-- name: ReconcileFindingGet :one
SELECT f.*, k.name AS check_name, k.kind AS check_kind, k.destination
FROM switchyard.reconcile_findings f
JOIN switchyard.reconcile_checks k ON k.id = f.check_id
WHERE f.id = @id;

-- name: ReconcileFindingEvents :many
SELECT id, cycle_id, event, actor, reason, at
FROM switchyard.reconcile_finding_events
WHERE finding_id = @finding_id
ORDER BY id;

-- name: ReconcileFindingGroups :many
-- ReconcileFindingGroups groups the open drift by (check, kind): what
-- collaborative triage will show as one item each (internal/reconcile,
-- triage.go).
SELECT k.name AS check_name, f.kind, count(*)::bigint AS findings,
    min(f.first_seen_at)::timestamptz AS first_seen_at, max(f.last_seen_at)::timestamptz AS last_seen_at,
    min(f.id)::bigint AS sample_id
FROM switchyard.reconcile_findings f
JOIN switchyard.reconcile_checks k ON k.id = f.check_id
WHERE f.status IN ('open', 'repair_requested')
GROUP BY k.name, f.kind
ORDER BY k.name, f.kind;

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
