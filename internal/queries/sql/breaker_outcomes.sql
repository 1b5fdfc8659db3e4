-- switchyard.breaker_outcomes: per-second delivery outcomes each process
-- shares, so that every dispatcher's breaker sees the whole cluster.

-- name: BreakerOutcomeShare :many
-- Adds this process's outcomes since its last call (one element per
-- destination in the add_ arrays; zero counts are skipped) to the current
-- second's bucket, deletes buckets older than retention_ms, and returns,
-- for each destination in the destinations array, the other processes'
-- outcomes of its last lookback_ms (the same position in lookback_ms).
-- The rows added are this process's own, which the sums leave out, so the
-- statement's snapshot not seeing them changes nothing. Parallel arrays
-- are read by subscript: sqlc cannot type a multi-argument unnest.
WITH added AS (
    INSERT INTO switchyard.breaker_outcomes AS o (destination, owner, bucket, successes, failures)
    SELECT (sqlc.arg(add_destinations)::text[])[n], sqlc.arg(owner)::text, date_trunc('second', now()),
        (sqlc.arg(add_successes)::bigint[])[n], (sqlc.arg(add_failures)::bigint[])[n]
    FROM generate_series(1, cardinality(sqlc.arg(add_destinations)::text[])) AS n
    WHERE (sqlc.arg(add_successes)::bigint[])[n] + (sqlc.arg(add_failures)::bigint[])[n] > 0
    ON CONFLICT (destination, bucket, owner) DO UPDATE
        SET successes = o.successes + excluded.successes, failures = o.failures + excluded.failures
    RETURNING 1
), trimmed AS (
    DELETE FROM switchyard.breaker_outcomes
    WHERE bucket < now() - sqlc.arg(retention_ms)::bigint * interval '1 millisecond'
    RETURNING 1
), asked AS (
    SELECT (sqlc.arg(destinations)::text[])[n] AS destination, (sqlc.arg(lookback_ms)::bigint[])[n] AS lookback_ms
    FROM generate_series(1, cardinality(sqlc.arg(destinations)::text[])) AS n
)
SELECT a.destination::text AS destination,
       coalesce(sum(o.successes), 0)::bigint AS successes,
       coalesce(sum(o.failures), 0)::bigint AS failures
FROM asked a
LEFT JOIN switchyard.breaker_outcomes o
    ON o.destination = a.destination AND o.owner <> sqlc.arg(owner)::text
   -- Only buckets begun within the lookback: after a breaker closed, none
   -- that counted failures from before.
   AND o.bucket >= now() - a.lookback_ms * interval '1 millisecond'
GROUP BY a.destination;
