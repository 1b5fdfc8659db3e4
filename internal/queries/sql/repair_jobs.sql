-- Bulk repair jobs: jobs of kind 'repair' in switchyard.replay_jobs
-- (migrations/00110_repair_jobs.sql), worked by the bulk replay runner.

-- name: RepairJobCreate :one
-- RepairJobCreate starts a bulk repair job, unless one is already running
-- for the same filter key (no row then). Its upper bound is the newest
-- finding now: findings opened later wait for the next job.
INSERT INTO switchyard.replay_jobs (kind, filter, filter_key, mode, actor, reason, rate_per_sec, estimate, upper_id)
VALUES ('repair', @filter, @filter_key, 'redeliver', @actor, @reason, @rate_per_sec, @estimate,
    (SELECT coalesce(max(id), 0) FROM switchyard.reconcile_findings))
ON CONFLICT (filter_key) WHERE state = 'running' DO NOTHING
RETURNING *;

-- name: RepairJobCandidates :many
-- RepairJobCandidates is the next open findings of a check (and kind, ''
-- any) after a job's cursor, up to its upper bound, in id order.
SELECT f.id FROM switchyard.reconcile_findings f
JOIN switchyard.reconcile_checks k ON k.id = f.check_id
WHERE k.name = @check_name::text
  AND (@kind::text = '' OR f.kind = @kind::text)
  AND f.status = 'open'
  AND f.id > @after_id AND f.id <= @upper_id
ORDER BY f.id
LIMIT @batch_size;

-- name: RepairJobEstimate :one
-- RepairJobEstimate counts the open findings of a check (and kind), up to
-- a cap: the operator's question before confirming a bulk repair.
SELECT count(*) FROM (
    SELECT 1 FROM switchyard.reconcile_findings f
    JOIN switchyard.reconcile_checks k ON k.id = f.check_id
    WHERE k.name = @check_name::text
      AND (@kind::text = '' OR f.kind = @kind::text)
      AND f.status = 'open'
    LIMIT @cap
) AS matching;

-- name: RepairJobLatest :many
-- RepairJobLatest is the newest bulk repair jobs, for the Reconciliation
-- page's progress.
SELECT * FROM switchyard.replay_jobs WHERE kind = 'repair' ORDER BY created_at DESC LIMIT @max_rows;
