-- switchyard.outbox_attempts: every delivery attempt of a message.

-- name: OutboxAttemptListLatest :many
-- OutboxAttemptListLatest is a message's newest delivery attempts, newest
-- first, shown beside its actions (outbox_attempts' message index).
SELECT * FROM switchyard.outbox_attempts
WHERE message_id = @message_id
ORDER BY id DESC
LIMIT @max_rows;

-- name: OutboxAttemptPrune :execrows
DELETE FROM switchyard.outbox_attempts
WHERE id IN (
    SELECT a.id FROM switchyard.outbox_attempts a WHERE a.finished_at < @cutoff
    ORDER BY a.finished_at LIMIT @batch_size
);
