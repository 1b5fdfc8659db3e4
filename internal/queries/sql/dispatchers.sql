-- switchyard.dispatchers: running dispatcher processes and their heartbeats.

-- name: DispatcherHeartbeat :exec
-- DispatcherHeartbeat registers a dispatcher or refreshes its row.
INSERT INTO switchyard.dispatchers (owner, host, pid, workers, leases_held)
VALUES (@owner, @host, @pid, @workers, @leases_held)
ON CONFLICT (owner) DO UPDATE SET
    leases_held = EXCLUDED.leases_held, heartbeat_at = now(), stopped_at = NULL;

-- name: DispatcherStopped :exec
UPDATE switchyard.dispatchers SET stopped_at = now(), leases_held = 0, heartbeat_at = now()
WHERE owner = @owner;

-- name: DispatcherList :many
SELECT owner, host, pid, workers, leases_held, started_at, heartbeat_at, stopped_at,
    extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age_seconds
FROM switchyard.dispatchers
ORDER BY stopped_at NULLS FIRST, started_at DESC
LIMIT @max_rows;

-- name: DispatcherPrune :execrows
DELETE FROM switchyard.dispatchers WHERE heartbeat_at < @cutoff;
