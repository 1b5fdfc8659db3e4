-- switchyard.dead_letter_groups: dead messages grouped by failure
-- fingerprint, and the dead messages of one group (internal/console
-- deadletters_list.go, deadletter_group_show.go). Plans:
-- internal/console/EXPLAIN.md.

-- name: DeadLetterGroupListOlder :many
-- DeadLetterGroupListOlder pages through the groups, most recently
-- seen first, after the keyset (last_dead_at, fingerprint) of the last row
-- shown; a NULL cursor starts at the top. dead_letter_groups_last.
SELECT * FROM switchyard.dead_letter_groups g
WHERE g.dead > 0
  AND (sqlc.narg(last_dead_at)::timestamptz IS NULL
       OR g.last_dead_at < sqlc.narg(last_dead_at)::timestamptz
       OR (g.last_dead_at = sqlc.narg(last_dead_at)::timestamptz AND g.fingerprint > sqlc.arg(fingerprint)::text))
ORDER BY g.last_dead_at DESC, g.fingerprint
LIMIT @max_rows;

-- name: DeadLetterGroupListNewer :many
-- DeadLetterGroupListNewer is the page before a cursor, in reverse
-- order (the caller reverses it).
SELECT * FROM switchyard.dead_letter_groups g
WHERE g.dead > 0
  AND (g.last_dead_at > sqlc.arg(last_dead_at)::timestamptz
       OR (g.last_dead_at = sqlc.arg(last_dead_at)::timestamptz AND g.fingerprint < sqlc.arg(fingerprint)::text))
ORDER BY g.last_dead_at, g.fingerprint DESC
LIMIT @max_rows;

-- name: DeadLetterGroupGet :one
SELECT * FROM switchyard.dead_letter_groups WHERE fingerprint = @fingerprint;

-- name: DeadLetterMessageListOlder :many
-- DeadLetterMessageListOlder lists a group's messages, newest first,
-- below a cursor (outbox_dead_fingerprint): dead and never replayed, as
-- the group counts them (status, switchyard.console_messages).
SELECT o.* FROM switchyard.console_messages o
WHERE o.state = 'dead' AND o.status = 'dead' AND o.error_fingerprint = sqlc.arg(fingerprint)::text AND o.id < sqlc.arg(cursor)::bigint
ORDER BY o.error_fingerprint, o.id DESC
LIMIT @max_rows;

-- name: DeadLetterMessageListNewer :many
SELECT o.* FROM switchyard.console_messages o
WHERE o.state = 'dead' AND o.status = 'dead' AND o.error_fingerprint = sqlc.arg(fingerprint)::text AND o.id > sqlc.arg(cursor)::bigint
ORDER BY o.error_fingerprint, o.id
LIMIT @max_rows;
