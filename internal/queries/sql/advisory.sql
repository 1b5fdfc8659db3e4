-- Advisory locks (no table). See internal/advisory.

-- name: AdvisoryXactLock :exec
-- AdvisoryXactLock takes pg_advisory_xact_lock(key), waiting at most
-- timeout_ms (migrations/00001_schema.sql).
SELECT switchyard.advisory_xact_lock(@key::bigint, @timeout_ms::integer);

-- name: AdvisoryXactTryLock :one
-- AdvisoryXactTryLock takes pg_advisory_xact_lock(key) if nobody holds it,
-- without waiting: the cheap path when there is no contention.
SELECT pg_try_advisory_xact_lock(@key::bigint);
