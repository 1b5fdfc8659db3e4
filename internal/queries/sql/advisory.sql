-- Advisory locks. See internal/advisory.

-- name: AdvisoryXactLock :exec
-- AdvisoryXactLock takes pg_advisory_xact_lock(key), waiting at most
-- timeout_ms (migrations/00005_inbox.sql).
SELECT switchyard.advisory_xact_lock(@key::bigint, @timeout_ms::integer);
