-- The console's message detail page (internal/console/message_show.go).

-- name: ConsoleMessageGet :one
SELECT * FROM switchyard.outbox WHERE id = @id;

-- name: ConsoleMessageIDByMessageID :one
-- ConsoleMessageIDByMessageID resolves a deep link by message id, which is
-- also the idempotency key every delivery carries.
SELECT id FROM switchyard.outbox WHERE message_id = @message_id;

-- name: ConsoleMessagePayload :one
SELECT payload::text FROM switchyard.outbox WHERE id = @id;

-- name: ConsoleMessageAttempts :many
SELECT * FROM switchyard.outbox_attempts
WHERE message_id = @message_id
ORDER BY id
LIMIT @max_rows;

-- name: ConsoleMessageReplays :many
-- ConsoleMessageReplays lists the replays of a message (outbox_replay_of).
SELECT o.* FROM switchyard.console_messages o
WHERE o.replay_of = @id
ORDER BY o.id
LIMIT @max_rows;

-- name: ConsoleMessageStatus :one
-- ConsoleMessageStatus is a message's console state and, once replayed,
-- its newest replay's state: the definition in switchyard.console_messages,
-- which every list and filter uses too.
SELECT o.status, o.replay_outcome
FROM switchyard.console_messages o WHERE o.id = @id;
