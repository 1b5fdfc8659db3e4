-- Operator actions' own reads: what the actions panel of one message shows.
-- See internal/console/message_actions_show.go.

-- name: ActionMessageGet :one
-- ActionMessageGet reads one message for its actions panel, with whether a
-- replay of it is in flight, the replay it most recently had, and whether
-- it is the dead head its aggregate is blocked by.
SELECT o.id, o.topic, o.destination, o.aggregate_type, o.aggregate_id, o.payload, o.headers, o.state,
    o.attempts, o.last_error, o.replay_of, o.replays, o.generation,
    EXISTS (SELECT 1 FROM switchyard.outbox r WHERE r.replay_of = o.id AND r.state = 'pending') AS replay_pending,
    coalesce((SELECT max(r.id) FROM switchyard.outbox r WHERE r.replay_of = o.id), 0)::bigint AS last_replay_id,
    coalesce((SELECT r.state FROM switchyard.outbox r WHERE r.replay_of = o.id ORDER BY r.id DESC LIMIT 1), '')::text AS last_replay_state,
    EXISTS (SELECT 1 FROM switchyard.outbox_blocked_aggregates b WHERE b.dead_message_id = o.id) AS blocking
FROM switchyard.outbox o
WHERE o.id = @id;

-- name: ActionMessageLastAttempts :many
-- ActionMessageLastAttempts is a message's newest delivery attempts, newest
-- first, shown beside its actions (outbox_attempts' message index).
SELECT * FROM switchyard.outbox_attempts
WHERE message_id = @message_id
ORDER BY id DESC
LIMIT @max_rows;
