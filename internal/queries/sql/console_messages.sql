-- The console's message browser (internal/console/messages_list.go). Every
-- list is a keyset page in id order over one index: Older pages go down
-- from a cursor (newest first), Newer pages go up from one (the caller
-- reverses them). floor and ceiling bound the ids (a time range, mapped to
-- ids by ConsoleMessageAtOrAfter: created_at follows id). Each query takes the same filters, NULL meaning "any", so
-- the handler picks the query whose index fits the most selective filter
-- and passes every filter unchanged. The error filter searches the first
-- 512 characters of each error (where its message is; errors are stored up
-- to 2,048 bytes): a bound on what one page may cost (EXPLAIN.md). The access path's own predicate comes
-- last, so that every query's parameters are in the same order. Plans at
-- 1,000,000 rows: internal/console/EXPLAIN.md.

-- name: ConsoleMessagesOlder :many
-- ConsoleMessagesOlder walks the primary key.
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id < @cursor::bigint
ORDER BY o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id > @cursor::bigint
ORDER BY o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesPendingOlder :many
-- ConsoleMessagesPendingOlder walks outbox_pending_id.
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id < @cursor::bigint
    AND o.state = 'pending'
ORDER BY o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesPendingNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id > @cursor::bigint
    AND o.state = 'pending'
ORDER BY o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesDeadOlder :many
-- ConsoleMessagesDeadOlder walks outbox_dead_id: the dead and the
-- replayed (dead, then replayed), told apart by status (the view).
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id < @cursor::bigint
    AND o.state = 'dead'
ORDER BY o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesDeadNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id > @cursor::bigint
    AND o.state = 'dead'
ORDER BY o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesDiscardedOlder :many
-- ConsoleMessagesDiscardedOlder walks outbox_discarded_id.
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR o.last_error ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id < @cursor::bigint
    AND o.state = 'discarded'
ORDER BY o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesDiscardedNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR o.last_error ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id > @cursor::bigint
    AND o.state = 'discarded'
ORDER BY o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesFailedOlder :many
-- ConsoleMessagesFailedOlder walks outbox_failed_id (error text searches).
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id < @cursor::bigint
    AND o.last_error IS NOT NULL
ORDER BY o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesFailedNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id > @cursor::bigint
    AND o.last_error IS NOT NULL
ORDER BY o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesTopicOlder :many
-- ConsoleMessagesTopicOlder walks outbox_topic_id (messages not delivered).
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id < @cursor::bigint
    AND o.topic = sqlc.narg(topic)::text
    AND o.state <> 'delivered' -- the partial index's predicate
ORDER BY o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesTopicNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id > @cursor::bigint
    AND o.topic = sqlc.narg(topic)::text
    AND o.state <> 'delivered' -- the partial index's predicate
ORDER BY o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesDestinationOlder :many
-- ConsoleMessagesDestinationOlder walks outbox_destination_id (messages not
-- delivered).
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id < @cursor::bigint
    AND o.destination = sqlc.narg(destination)::text
    AND o.state <> 'delivered' -- the partial index's predicate
ORDER BY o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesDestinationNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id > @cursor::bigint
    AND o.destination = sqlc.narg(destination)::text
    AND o.state <> 'delivered' -- the partial index's predicate
ORDER BY o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesAggregateOlder :many
-- ConsoleMessagesAggregateOlder walks outbox_aggregate.
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id < @cursor::bigint
    AND o.aggregate_id <> '' AND o.aggregate_type = sqlc.narg(aggregate_type)::text AND o.aggregate_id = sqlc.narg(aggregate_id)::text
ORDER BY o.id DESC
LIMIT @max_rows;

-- name: ConsoleMessagesAggregateNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
    AND o.id > @cursor::bigint
    AND o.aggregate_id <> '' AND o.aggregate_type = sqlc.narg(aggregate_type)::text AND o.aggregate_id = sqlc.narg(aggregate_id)::text
ORDER BY o.id ASC
LIMIT @max_rows;

-- name: ConsoleMessagesNewCount :one
-- ConsoleMessagesNewCount counts, up to 100, the messages matching the
-- filters above the first row shown (cursor); the caller caps ceiling a
-- few thousand ids ahead: the "N new" control needs a small number
-- cheaply, never a total.
SELECT count(*) FROM (
    SELECT 1 FROM switchyard.console_messages o
    WHERE
    (sqlc.narg(state)::text IS NULL OR o.status = sqlc.narg(state)::text)
    AND (sqlc.narg(topic)::text IS NULL OR o.topic = sqlc.narg(topic)::text)
    AND (sqlc.narg(destination)::text IS NULL OR o.destination = sqlc.narg(destination)::text)
    AND (sqlc.narg(aggregate_type)::text IS NULL OR o.aggregate_type = sqlc.narg(aggregate_type)::text)
    AND (sqlc.narg(aggregate_id)::text IS NULL OR o.aggregate_id = sqlc.narg(aggregate_id)::text)
    AND (sqlc.narg(error_text)::text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || sqlc.narg(error_text)::text || '%')
    AND (sqlc.narg(created_from)::timestamptz IS NULL OR o.created_at >= sqlc.narg(created_from)::timestamptz)
    AND (sqlc.narg(created_to)::timestamptz IS NULL OR o.created_at < sqlc.narg(created_to)::timestamptz)
    AND o.id >= @floor::bigint AND o.id <= @ceiling::bigint
        AND o.id > @cursor::bigint
    LIMIT 100
) AS s;

-- name: ConsoleMessageIDBounds :one
SELECT coalesce(min(id), 0)::bigint AS low, coalesce(max(id), 0)::bigint AS high FROM switchyard.outbox;

-- name: ConsoleMessageAtOrAfter :one
-- ConsoleMessageAtOrAfter is one probe of the search that maps a time to
-- an id: the first message at or above an id (primary key).
SELECT id, created_at FROM switchyard.outbox WHERE id >= @id ORDER BY id LIMIT 1;
