-- switchyard.replay_jobs: bulk replay jobs and bulk repair jobs (kind
-- 'repair'), worked by the runner in internal/bulkreplay.

-- name: RepairJobCreate :one
-- RepairJobCreate starts a bulk repair job, unless one is already running
-- for the same filter key (no row then). Its upper bound is the newest
-- finding now: findings opened later wait for the next job.
INSERT INTO switchyard.replay_jobs (kind, filter, filter_key, mode, actor, reason, rate_per_sec, estimate, upper_id)
VALUES ('repair', @filter, @filter_key, 'redeliver', @actor, @reason, @rate_per_sec, @estimate,
    (SELECT coalesce(max(id), 0) FROM switchyard.reconcile_findings))
ON CONFLICT (filter_key) WHERE state = 'running' DO NOTHING
RETURNING *;

-- name: RepairJobListCandidates :many
-- RepairJobListCandidates is the next open findings of a check (and kind, ''
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

-- name: RepairJobListLatest :many
-- RepairJobListLatest is the newest bulk repair jobs, for the Reconciliation
-- page's progress.
SELECT * FROM switchyard.replay_jobs WHERE kind = 'repair' ORDER BY created_at DESC LIMIT @max_rows;

-- name: ReplayJobCreate :one
-- ReplayJobCreate starts a job, unless one is already running for the same
-- filter (no row then). Its cursor starts at cursor_id and its upper bound
-- is the newest message now, or ceiling_id if lower: a created window's
-- ids (msgfilter.IDRange), so that its batches walk that window only.
INSERT INTO switchyard.replay_jobs (filter, filter_key, mode, actor, reason, rate_per_sec, estimate, cursor_id, upper_id)
VALUES (@filter, @filter_key, @mode, @actor, @reason, @rate_per_sec, @estimate, @cursor_id,
    least((SELECT coalesce(max(id), 0) FROM switchyard.outbox), @ceiling_id::bigint))
ON CONFLICT (filter_key) WHERE state = 'running' DO NOTHING
RETURNING *;

-- name: ReplayJobGetRunning :one
SELECT * FROM switchyard.replay_jobs WHERE filter_key = @filter_key AND state = 'running';

-- name: ReplayJobGet :one
SELECT * FROM switchyard.replay_jobs WHERE id = @id;

-- name: ReplayJobList :many
SELECT * FROM switchyard.replay_jobs ORDER BY created_at DESC LIMIT @max_rows;

-- name: ReplayJobClaim :one
-- ReplayJobClaim leases one running job of one of kinds (those the runner
-- has a worker for) whose lease is free or expired.
UPDATE switchyard.replay_jobs j
SET lease_owner = @owner::text, lease_version = j.lease_version + 1,
    lease_expires_at = now() + make_interval(secs => @lease_seconds::float8)
WHERE j.id = (
    SELECT id FROM switchyard.replay_jobs
    WHERE state = 'running' AND (lease_expires_at IS NULL OR lease_expires_at < now())
      AND kind = ANY(@kinds::text[])
    ORDER BY created_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: ReplayJobListCandidates :many
-- ReplayJobListCandidates lists the next max_rows dead messages of a job's
-- filter (switchyard.replay_candidates: dead as switchyard.console_messages
-- defines it, never replayed; each field optional) from floor_id (after
-- its cursor) to ceiling_id (its upper bound), in id order. Its parameters
-- are ReplayJobCount's.
SELECT c.id::bigint AS id FROM switchyard.replay_candidates(
    sqlc.narg(fingerprint)::text, sqlc.narg(destination)::text, sqlc.narg(destination_prefix)::text, sqlc.narg(destination_upper)::text,
    sqlc.narg(topic)::text, sqlc.narg(topic_prefix)::text, sqlc.narg(topic_upper)::text,
    sqlc.narg(aggregate_type)::text, sqlc.narg(aggregate_id)::text, sqlc.narg(error_text)::text,
    sqlc.narg(dead_from)::timestamptz, sqlc.narg(dead_to)::timestamptz,
    sqlc.narg(created_from)::timestamptz, sqlc.narg(created_to)::timestamptz, @blocked_heads::boolean) AS c (id)
WHERE c.id >= @floor_id::bigint AND c.id <= @ceiling_id::bigint
ORDER BY c.id
LIMIT @max_rows;

-- name: ReplayJobCount :one
-- ReplayJobCount counts a filter's dead messages (as ReplayJobListCandidates
-- finds them) with an id from floor_id to ceiling_id, up to max_rows: the
-- operator's question before confirming a job, asked only when the
-- planner expects at most that many (bulkreplay.Estimate).
SELECT count(*) FROM (
    SELECT 1 FROM switchyard.replay_candidates(
        sqlc.narg(fingerprint)::text, sqlc.narg(destination)::text, sqlc.narg(destination_prefix)::text, sqlc.narg(destination_upper)::text,
        sqlc.narg(topic)::text, sqlc.narg(topic_prefix)::text, sqlc.narg(topic_upper)::text,
        sqlc.narg(aggregate_type)::text, sqlc.narg(aggregate_id)::text, sqlc.narg(error_text)::text,
        sqlc.narg(dead_from)::timestamptz, sqlc.narg(dead_to)::timestamptz,
        sqlc.narg(created_from)::timestamptz, sqlc.narg(created_to)::timestamptz, @blocked_heads::boolean) AS c (id)
    WHERE c.id >= @floor_id::bigint AND c.id <= @ceiling_id::bigint
    LIMIT @max_rows
) AS matching;

-- name: ReplayJobEstimate :one
-- ReplayJobEstimate is the planner's estimate of ReplayJobCount without its
-- max_rows (switchyard.replay_candidates_estimate): it reads no message.
SELECT switchyard.replay_candidates_estimate(
    sqlc.narg(fingerprint)::text, sqlc.narg(destination)::text, sqlc.narg(destination_prefix)::text, sqlc.narg(destination_upper)::text,
    sqlc.narg(topic)::text, sqlc.narg(topic_prefix)::text, sqlc.narg(topic_upper)::text,
    sqlc.narg(aggregate_type)::text, sqlc.narg(aggregate_id)::text, sqlc.narg(error_text)::text,
    sqlc.narg(dead_from)::timestamptz, sqlc.narg(dead_to)::timestamptz,
    sqlc.narg(created_from)::timestamptz, sqlc.narg(created_to)::timestamptz, @blocked_heads::boolean,
    @floor_id::bigint, @ceiling_id::bigint)::bigint AS estimate;

-- name: ReplayJobAdvance :one
-- ReplayJobAdvance records a batch's progress, fenced by the lease version,
-- extends the lease, finishes the job when the batch was the last, and puts
-- the progress on the change feed. No row: the lease was lost, or the job
-- was cancelled meanwhile.
WITH advanced AS (
    UPDATE switchyard.replay_jobs j
    SET cursor_id = greatest(j.cursor_id, @cursor_id::bigint),
        replayed = j.replayed + @replayed::bigint,
        skipped = j.skipped + @skipped::bigint,
        lease_expires_at = now() + make_interval(secs => @lease_seconds::float8),
        state = CASE WHEN @last::boolean THEN 'done' ELSE j.state END,
        finished_at = CASE WHEN @last::boolean THEN now() END,
        updated_at = now()
    WHERE j.id = @id::uuid AND j.lease_version = @lease_version::bigint AND j.state = 'running'
    RETURNING j.id, j.state, j.replayed, j.skipped, j.estimate
),
feed AS (
    INSERT INTO switchyard.changes (kind, subject, payload)
    SELECT 'replay_job', a.id::text, jsonb_build_object('state', a.state, 'replayed', a.replayed, 'skipped', a.skipped, 'estimate', a.estimate)
    FROM advanced a
)
SELECT state FROM advanced;

-- name: ReplayJobCancel :one
-- ReplayJobCancel stops a running job; what it replayed stays replayed.
WITH cancelled AS (
    UPDATE switchyard.replay_jobs j SET state = 'cancelled', finished_at = now(), updated_at = now()
    WHERE j.id = @id::uuid AND j.state = 'running'
    RETURNING j.id, j.replayed, j.skipped, j.estimate
),
feed AS (
    INSERT INTO switchyard.changes (kind, subject, payload)
    SELECT 'replay_job', c.id::text, jsonb_build_object('state', 'cancelled', 'replayed', c.replayed, 'skipped', c.skipped, 'estimate', c.estimate)
    FROM cancelled c
)
SELECT count(*) FROM cancelled;

-- name: ReplayJobListOutcomes :many
-- ReplayJobListOutcomes counts the replays of the given jobs by state, so a
-- job shows how many were delivered, died again or are still pending as
-- they settle. outbox_replay_job (job, state) answers it from the index;
-- it reads one entry per replay of the jobs shown, off the dispatcher's
-- path.
SELECT o.replay_job::uuid AS job, o.state, count(*)::bigint AS messages
FROM switchyard.outbox o
WHERE o.replay_job = ANY(@jobs::uuid[])
GROUP BY o.replay_job, o.state;

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
