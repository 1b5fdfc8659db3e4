-- Retention of what grows with use: see internal/retention. Each delete
-- takes at most @batch_size rows, oldest first, so that no statement holds
-- its locks for long; the caller repeats until a batch comes back short.

-- name: IdempotencyKeyPruneBatch :execrows
-- IdempotencyKeyPruneBatch deletes keys that expired: a retry that late is
-- a new request anyway (IdempotencyKeyClaim takes an expired key over).
DELETE FROM switchyard.idempotency_keys
WHERE (principal, key) IN (
    SELECT k.principal, k.key FROM switchyard.idempotency_keys k
    WHERE k.expires_at <= now()
    ORDER BY k.expires_at
    LIMIT @batch_size
)
AND expires_at <= now();

-- name: InboxEventPrune :execrows
-- InboxEventPrune deletes settled inbox events (processed, or stale: a
-- newer version was applied) received more than @age_seconds ago. Failed,
-- parked and held events are never deleted here: they wait for an
-- operator or for their predecessor.
DELETE FROM switchyard.inbox_events
WHERE id IN (
    SELECT e.id FROM switchyard.inbox_events e
    WHERE e.status IN ('processed', 'stale')
      AND e.received_at < now() - make_interval(secs => @age_seconds::float8)
    ORDER BY e.id
    LIMIT @batch_size
)
AND status IN ('processed', 'stale');

-- name: BreakerEventPrune :execrows
-- BreakerEventPrune deletes breaker changes older than @age_seconds,
-- except the latest of each destination and owner: the dashboard shows a
-- breaker's current state from it, however old it is.
DELETE FROM switchyard.breaker_events
WHERE id IN (
    SELECT e.id FROM switchyard.breaker_events e
    WHERE e.changed_at < now() - make_interval(secs => @age_seconds::float8)
      AND EXISTS (
        SELECT 1 FROM switchyard.breaker_events n
        WHERE n.destination = e.destination AND n.owner = e.owner AND n.changed_at > e.changed_at)
    ORDER BY e.id
    LIMIT @batch_size
);

-- name: ReplayJobPrune :execrows
-- ReplayJobPrune deletes bulk replay jobs that finished (done or
-- cancelled) more than @age_seconds ago. A running job is never deleted.
DELETE FROM switchyard.replay_jobs
WHERE id IN (
    SELECT j.id FROM switchyard.replay_jobs j
    WHERE j.state <> 'running'
      AND j.finished_at < now() - make_interval(secs => @age_seconds::float8)
    ORDER BY j.finished_at
    LIMIT @batch_size
)
AND state <> 'running';
