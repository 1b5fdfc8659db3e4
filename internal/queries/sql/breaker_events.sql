-- switchyard.breaker_events: circuit breaker state changes.

-- name: BreakerEventInsert :exec
-- BreakerEventInsert records a breaker's change of state and appends it to
-- the change feed in the same statement.
WITH event AS (
    INSERT INTO switchyard.breaker_events (destination, owner, from_state, to_state, changed_at)
    VALUES (@destination, @owner, @from_state, @to_state, @changed_at)
    RETURNING destination, owner, from_state, to_state
)
INSERT INTO switchyard.changes (kind, subject, payload)
SELECT 'breaker', e.destination, jsonb_build_object('from', e.from_state, 'to', e.to_state, 'owner', e.owner)
FROM event e;

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
