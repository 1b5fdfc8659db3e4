-- switchyard.inbox_event_attempts: the recorded attempts of inbound events
-- (failures and operator retries), for the event's page.

-- name: InboxEventAttemptList :many
SELECT a.attempt, a.at, a.outcome, a.error, a.actor, a.request_id
FROM switchyard.inbox_event_attempts a
WHERE a.inbox_event_id = @inbox_event_id
ORDER BY a.attempt;

-- name: InboxEventAttemptGetByRequest :one
-- InboxEventAttemptGetByRequest finds the retry a request id already made.
SELECT a.inbox_event_id, a.attempt, a.outcome, a.error
FROM switchyard.inbox_event_attempts a
WHERE a.request_id = @request_id;

-- name: InboxEventAttemptInsert :one
-- InboxEventAttemptInsert records an operator's retry that took effect
-- (processed, or settled as stale or held), numbered after the event's
-- failed attempts and every recorded one; the event's row lock
-- (InboxEventLockForRetry) serialises them.
WITH p AS (
    SELECT @inbox_event_id::bigint AS id, @failed_attempts::integer AS failed
), prev AS (
    SELECT coalesce(max(a.attempt), 0)::integer AS n
    FROM switchyard.inbox_event_attempts a, p
    WHERE a.inbox_event_id = p.id
)
INSERT INTO switchyard.inbox_event_attempts (inbox_event_id, attempt, outcome, actor, request_id)
SELECT p.id, CASE WHEN p.failed > prev.n THEN p.failed + 1 ELSE prev.n + 1 END,
    @outcome::text, @actor::text, @request_id::uuid
FROM p, prev
RETURNING attempt;
