-- switchyard.reconcile_findings: what a cycle found, its lifecycle and its
-- repairs through the outbox.

-- name: ReconcileFindingUpsert :many
-- ReconcileFindingUpsert records what one batch found: keys[n] has drift
-- kinds[n] (ref: the message id of a delivery check; diff: a mismatch's
-- fields). A finding exists once per (check, key, kind): seen again, it
-- moves to this cycle; resolved before, it is reopened. Keys must be
-- distinct per kind within one call. History rows say opened/reopened.
-- One row per kind that opened or reopened findings: the groups that
-- drifted (their triage items are tracked in the same transaction).
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
    RETURNING f.id, f.kind
),
ev AS (
    INSERT INTO switchyard.reconcile_finding_events (finding_id, cycle_id, event)
    SELECT up.id, @cycle_id, CASE WHEN p.id IS NULL THEN 'opened' ELSE 'reopened' END
    FROM up LEFT JOIN prior p ON p.id = up.id
    WHERE p.id IS NULL OR p.status = 'resolved'
    RETURNING finding_id, event
)
SELECT up.kind, count(*) FILTER (WHERE ev.event = 'opened')::bigint AS opened,
    count(*) FILTER (WHERE ev.event = 'reopened')::bigint AS reopened
FROM ev JOIN up ON up.id = ev.finding_id
GROUP BY up.kind
ORDER BY up.kind;

-- name: ReconcileFindingResolveUnseen :execrows
-- ReconcileFindingResolveUnseen resolves the check's open findings that
-- the complete cycle cycle_id no longer saw, with a history row each.
WITH resolved AS (
    UPDATE switchyard.reconcile_findings
    SET status = 'resolved', resolved_at = now()
    WHERE check_id = @check_id AND status IN ('open', 'repair_requested') AND last_cycle_id < @cycle_id::bigint
    RETURNING id
)
INSERT INTO switchyard.reconcile_finding_events (finding_id, cycle_id, event)
SELECT id, @cycle_id::bigint, 'resolved' FROM resolved;

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
-- missing_remote; the replay columns of migrations/00003_outbox.sql).
-- The request id makes it happen once: a second call with the same one
-- inserts nothing and gets no row (ReconcileReplayGetByRequest finds it).
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

-- name: ReconcileReplayGetByRequest :one
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

-- name: ReconcileFindingListPage :many
-- ReconcileFindingListPage is a page of findings, newest first, before
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

-- name: ReconcileFindingEventList :many
SELECT id, cycle_id, event, actor, reason, at
FROM switchyard.reconcile_finding_events
WHERE finding_id = @finding_id
ORDER BY id;

-- name: ReconcileFindingGroupList :many
-- ReconcileFindingGroupList groups the open drift by (check, kind): what
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
