-- switchyard.outbox_attempts: every delivery attempt of a message but the
-- one that delivered it, which is on the message's row; read both through
-- switchyard.outbox_attempt_log (migrations/00023_outbox_delivered_attempt.sql).

-- name: OutboxAttemptListLatest :many
-- OutboxAttemptListLatest is a message's newest delivery attempts, newest
-- first, shown beside its actions (outbox_attempts' message index).
SELECT * FROM switchyard.outbox_attempt_log
WHERE message_id = @message_id
ORDER BY finished_at DESC, attempt DESC
LIMIT @max_rows;

-- name: OutboxAttemptPrune :execrows
DELETE FROM switchyard.outbox_attempts
WHERE id IN (
    SELECT a.id FROM switchyard.outbox_attempts a WHERE a.finished_at < @cutoff
    ORDER BY a.finished_at LIMIT @batch_size
);
