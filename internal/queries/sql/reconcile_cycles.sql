-- switchyard.reconcile_cycles: one pass of a check, with its cursor.

-- name: ReconcileCycleGetRunning :one
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

-- name: ReconcileCycleCommitAsync :exec
-- ReconcileCycleCommitAsync lets the transaction that records a batch
-- commit without waiting for its WAL flush (synchronous_commit off for
-- this transaction only). A server crash may lose the last few batches'
-- records, all of each or none (the cursor with its findings and
-- counters), and the cycle then examines those keys again: nothing is
-- skipped, and recording a batch twice changes nothing. What it saves is
-- a flush per batch: thousands per cycle.
SELECT set_config('synchronous_commit', 'off', true);

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

-- name: ReconcileCycleListRecent :many
-- ReconcileCycleListRecent is the newest cycles of every check.
SELECT y.id, y.state, y.started_at, y.finished_at, y.estimate, y.examined, y.in_sync,
    y.missing_remote, y.missing_local, y.mismatch, y.unknown, y.runs, y.unexamined, k.name AS check_name
FROM switchyard.reconcile_cycles y
JOIN switchyard.reconcile_checks k ON k.id = y.check_id
ORDER BY y.id DESC
LIMIT @row_limit;
