-- switchyard.outbox_aggregates: the per-aggregate ordering state the
-- ordered claim walks.

-- name: OutboxAggregateProbeSooner :execrows
-- Brings forward the retry of aggregates of a destination that delivers
-- again: every aggregate whose head waits for a retry more than bound_ms
-- from now while later messages queue behind it, not leased and not
-- blocked by a dead head, becomes due within the next spread_ms (spread
-- so that they do not all retry at once). Served by outbox_aggregates_due.
UPDATE switchyard.outbox_aggregates a
SET due_at = now() + random() * sqlc.arg(spread_ms)::bigint * interval '1 millisecond'
WHERE a.destination = sqlc.arg(destination)::text
  AND a.last_seq > a.done_seq AND a.last_seq > a.done_seq + 1
  AND a.lease_owner IS NULL
  AND a.due_at > now() + sqlc.arg(bound_ms)::bigint * interval '1 millisecond'
  AND a.due_at < 'infinity';

-- name: OutboxAggregatePrune :execrows
-- OutboxAggregatePrune deletes aggregates that have had no work since the
-- cutoff. The next message of such an aggregate starts a new row at
-- sequence 1: only pending messages are ordered, and it has none.
DELETE FROM switchyard.outbox_aggregates
WHERE (destination, aggregate_type, aggregate_id) IN (
    SELECT a.destination, a.aggregate_type, a.aggregate_id FROM switchyard.outbox_aggregates a
    WHERE a.last_seq = a.done_seq AND a.due_at < @cutoff
    LIMIT @batch_size
)
-- Checked again on the row itself: an enqueue may have given it work since.
AND last_seq = done_seq;
