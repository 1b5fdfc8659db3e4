-- +goose Up

-- Every attempt is recorded, and the attempt that delivered a message is
-- recorded on the message's own row: the finalize that marks it delivered
-- rewrites that row anyway, while a row of its own in outbox_attempts cost
-- an insert with three index entries and a foreign-key check per delivered
-- message, a tenth of a drain's CPU (BENCHMARKS.md, "Finalize per flush,
-- and the delivered attempt on the message's row"). outbox_attempts keeps
-- every other attempt: each failure (retry, dead) and each attempt that
-- did not apply (a stale lease), delivered or not. The finalize sets these
-- columns only where it marks the message delivered, and a delivered
-- message never changes again (a replay is a new message), so they are
-- written once.
--
-- The attempt's number is the message's attempts and its lease version the
-- message's lease_version: the finalize applies an outcome only under the
-- lease it was delivered under, and it counts that attempt.
ALTER TABLE switchyard.outbox
    ADD COLUMN delivered_by text,
    ADD COLUMN delivered_started_at timestamptz,
    ADD COLUMN delivered_ms double precision,
    ADD COLUMN delivered_status integer,
    ADD COLUMN delivered_response text;

-- outbox_attempt_log is every attempt of every message: outbox_attempts and
-- the delivered attempts on the messages' rows (messages delivered before
-- this migration have theirs in outbox_attempts).
CREATE VIEW switchyard.outbox_attempt_log AS
SELECT a.message_id, a.attempt, a.worker, a.lease_version, a.started_at, a.finished_at,
    a.outcome, a.applied, a.status_code, a.response, a.error, a.duration_ms
FROM switchyard.outbox_attempts a
UNION ALL
SELECT o.id, o.attempts, o.delivered_by, o.lease_version, o.delivered_started_at,
    o.delivered_started_at + make_interval(secs => o.delivered_ms / 1000),
    'delivered', true, o.delivered_status, o.delivered_response, NULL, o.delivered_ms
FROM switchyard.outbox o
WHERE o.delivered_by IS NOT NULL;

-- +goose Down
DROP VIEW switchyard.outbox_attempt_log;
-- The delivered attempts go back to outbox_attempts before their columns go.
INSERT INTO switchyard.outbox_attempts (message_id, attempt, worker, lease_version, started_at, finished_at,
    outcome, applied, status_code, response, error, duration_ms)
SELECT o.id, o.attempts, o.delivered_by, o.lease_version, o.delivered_started_at,
    o.delivered_started_at + make_interval(secs => o.delivered_ms / 1000),
    'delivered', true, o.delivered_status, o.delivered_response, NULL, o.delivered_ms
FROM switchyard.outbox o
WHERE o.delivered_by IS NOT NULL;
ALTER TABLE switchyard.outbox
    DROP COLUMN delivered_by,
    DROP COLUMN delivered_started_at,
    DROP COLUMN delivered_ms,
    DROP COLUMN delivered_status,
    DROP COLUMN delivered_response;
