-- switchyard.inbox_duplicates: per-source duplicate counters.

-- name: InboxDuplicateList :many
SELECT d.source, sum(d.count)::bigint AS duplicates, max(d.updated_at)::timestamptz AS last_at
FROM switchyard.inbox_duplicates d
GROUP BY d.source
ORDER BY d.source;

-- name: InboxDuplicateCount :one
SELECT coalesce(sum(count), 0)::bigint FROM switchyard.inbox_duplicates WHERE source = @source;
