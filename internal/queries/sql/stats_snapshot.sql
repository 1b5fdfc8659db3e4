-- switchyard.stats_snapshot and the statements that build it (internal/stats).
-- Every statement here runs on the statistics leader's one connection, once
-- per tick for the whole cluster, never per viewer; viewers read
-- StatsSnapshotGet.

-- name: StatsLeaderTryLock :one
-- StatsLeaderTryLock takes the statistics leader's session advisory lock
-- if nobody holds it. It is held until the connection closes.
SELECT pg_try_advisory_lock(@key::bigint);

-- name: StatsLeaderUnlock :exec
SELECT pg_advisory_unlock(@key::bigint);

-- name: StatsClockGet :one
-- StatsClockGet is the database's time: every age is measured against it.
SELECT now()::timestamptz AS now;

-- name: StatsPendingFlowList :many
-- StatsPendingFlowList counts pending messages per destination and topic by
-- state, reading at most max_rows of each claim index's rows (both are
-- partial on state = 'pending'): the cost is bounded by the backlog, never
-- by the table's history. A branch that returns max_rows rows was capped.
SELECT p.destination, p.topic,
    count(*) FILTER (WHERE p.lease_owner IS NULL AND p.attempts = 0 AND NOT p.stretched)::bigint AS queued,
    count(*) FILTER (WHERE p.lease_owner IS NOT NULL OR p.stretched)::bigint AS in_flight,
    count(*) FILTER (WHERE p.lease_owner IS NULL AND p.attempts > 0)::bigint AS retrying,
    min(p.created_at)::timestamptz AS oldest_created_at
FROM (
    -- An unordered first try in flight is leased in a stretch
    -- (OutboxClaimUnordered), its own row not written: one hash of the
    -- stretches' ids.
    (SELECT o.destination, o.topic, o.lease_owner, o.attempts, o.created_at,
        o.attempts = 0 AND o.id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s) AS stretched
     FROM switchyard.outbox o
     WHERE o.state = 'pending' AND o.aggregate_id = ''
     LIMIT @max_rows)
    UNION ALL
    (SELECT o.destination, o.topic, o.lease_owner, o.attempts, o.created_at, false
     FROM switchyard.outbox o
     WHERE o.state = 'pending' AND o.aggregate_id <> ''
     LIMIT @max_rows)
) p
GROUP BY p.destination, p.topic;

-- name: StatsDeadSignatureGet :one
-- StatsDeadSignatureGet changes whenever a message goes dead or leaves the
-- dead letters (dead_letter_groups is maintained by the finalize and by
-- operator actions): the leader recounts dead messages only then. A group
-- all of whose messages were replayed or discarded keeps its row (dead 0)
-- and is not counted, as the dead-letter page does not list it.
SELECT coalesce(sum(g.dead), 0)::bigint AS dead, count(*) FILTER (WHERE g.dead > 0)::bigint AS groups,
    coalesce(max(g.last_dead_at), 'epoch')::timestamptz AS last_dead_at
FROM switchyard.dead_letter_groups g;

-- name: StatsDeadFlowList :many
-- StatsDeadFlowList counts dead messages per destination and topic, at
-- most max_rows of them: status dead (switchyard.console_messages: dead
-- and never replayed), as the dead-letter groups count them. state =
-- 'dead', which that status implies, walks the partial index of dead
-- messages (outbox_dead_id).
SELECT d.destination, d.topic, count(*)::bigint AS dead
FROM (
    SELECT o.destination, o.topic FROM switchyard.console_messages o
    WHERE o.state = 'dead' AND o.status = 'dead'
    LIMIT @max_rows
) d
GROUP BY d.destination, d.topic;

-- name: StatsDeliverySecondList :many
-- StatsDeliverySecondList sums delivery_stats per second, destination and
-- topic from since on (a range of its primary key). The leader keeps the
-- last hour in memory and re-reads only the last few seconds each tick.
SELECT s.second, s.destination, s.topic,
    sum(s.delivered)::bigint AS delivered,
    sum(s.retried)::bigint AS retried,
    sum(s.dead)::bigint AS dead
FROM switchyard.delivery_stats s
WHERE s.second >= @since
GROUP BY s.second, s.destination, s.topic
ORDER BY s.second;

-- name: StatsBreakerList :many
-- StatsBreakerList is the latest breaker change of each destination, one
-- index probe per destination.
SELECT d.name AS destination, b.to_state, b.owner, b.changed_at
FROM switchyard.destinations d
CROSS JOIN LATERAL (
    SELECT e.to_state, e.owner, e.changed_at FROM switchyard.breaker_events e
    WHERE e.destination = d.name
    ORDER BY e.changed_at DESC
    LIMIT 1
) b
ORDER BY d.name;

-- name: StatsDestinationList :many
SELECT d.name FROM switchyard.destinations d ORDER BY d.name;

-- name: StatsDispatcherList :many
-- StatsDispatcherList lists running dispatchers and those stopped in the last
-- hour.
SELECT p.owner, p.host, p.pid, p.workers, p.leases_held, p.started_at, p.heartbeat_at, p.stopped_at
FROM switchyard.dispatchers p
WHERE p.stopped_at IS NULL OR p.stopped_at > now() - interval '1 hour'
ORDER BY p.stopped_at NULLS FIRST, p.started_at DESC
LIMIT @max_rows;

-- name: StatsBlockedAggregateCount :one
-- StatsBlockedAggregateCount counts aggregates held by a dead head: a small
-- maintained table.
SELECT count(*)::bigint FROM switchyard.outbox_blocked_aggregates;

-- name: StatsInboxAttentionList :many
-- StatsInboxAttentionList counts inbound events that are not processed, per
-- source and status, through inbox_events_attention (at most max_rows).
SELECT a.source, a.status, count(*)::bigint AS events
FROM (
    SELECT e.source, e.status FROM switchyard.inbox_events e
    WHERE e.status <> 'processed'
    LIMIT @max_rows
) a
GROUP BY a.source, a.status;

-- name: StatsInboxReceivedList :many
-- StatsInboxReceivedList counts recorded events per source, at most max_rows
-- of them (an index-only scan of the (source, event_id) key); the leader
-- runs it every few seconds, not every tick.
SELECT r.source, count(*)::bigint AS events
FROM (
    SELECT e.source FROM switchyard.inbox_events e
    LIMIT @max_rows
) r
GROUP BY r.source;

-- name: StatsInboxDuplicateList :many
SELECT d.source, sum(d.count)::bigint AS duplicates
FROM switchyard.inbox_duplicates d
GROUP BY d.source;

-- name: StatsSnapshotSave :one
-- StatsSnapshotSave stores a new snapshot and appends its change-feed row
-- in one statement; the leader sends the wake-up NOTIFY after it. The
-- row's payload carries the version (so that no cache serves an older
-- one), the newest outbox id and the latest delivery's time (so that an
-- open message list knows, without asking the database, whether anything
-- arrived above it: StatsOutboxHeadGet).
WITH saved AS (
    UPDATE switchyard.stats_snapshot
    SET version = version + 1, computed_at = now(), leader = @leader, snapshot = @snapshot
    RETURNING version
), feed AS (
    INSERT INTO switchyard.changes (kind, subject, payload)
    SELECT 'stats', '', jsonb_build_object('version', s.version, 'newest_outbox_id', @newest_outbox_id::bigint,
        'newest_delivery_us', @newest_delivery_us::bigint) FROM saved s
)
SELECT s.version FROM saved s;

-- name: StatsSnapshotGet :one
-- StatsSnapshotGet is what every viewer reads (through an in-process
-- cache): one row by primary key.
SELECT version, computed_at, leader, snapshot, now()::timestamptz AS read_at
FROM switchyard.stats_snapshot;

-- name: StatsOutboxHeadGet :one
-- StatsOutboxHeadGet is the newest outbox message's id (one backward probe
-- of the primary key) and when the latest delivery was, in microseconds
-- since the epoch (one backward probe of outbox_finished_id; 0: none):
-- neither enqueues nor deliveries are on the change feed (invariant 9), so
-- the snapshot carries both to the message lists' "N new" control, the
-- delivered list's the second.
SELECT coalesce((SELECT max(o.id) FROM switchyard.outbox o), 0)::bigint AS newest_id,
    coalesce((
        SELECT (extract(epoch FROM o.finished_at) * 1000000)::bigint FROM switchyard.outbox o
        WHERE o.state = 'delivered'
        ORDER BY o.finished_at DESC, o.id DESC
        LIMIT 1
    ), 0)::bigint AS newest_delivery_us;

-- name: StatsInboxHeadGet :one
-- StatsInboxHeadGet is the newest inbound event's id (one probe of the
-- primary key): the leader recounts received events only when it moved.
SELECT coalesce(max(e.id), 0)::bigint FROM switchyard.inbox_events e;

-- name: StatsSnapshotTouch :exec
-- StatsSnapshotTouch records that the leader is alive and the snapshot
-- still current (nothing changed), without a change-feed row: viewers tell
-- a stopped leader by an old computed_at.
UPDATE switchyard.stats_snapshot SET computed_at = now(), leader = @leader;
