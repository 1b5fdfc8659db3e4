-- switchyard.inbox_event_duplicates: each duplicate delivery of an event.

-- name: InboxEventDuplicateList :many
-- InboxEventDuplicateList lists the newest duplicate deliveries of an
-- event, with how many there were in all.
SELECT d.received_at, count(*) OVER ()::bigint AS total
FROM switchyard.inbox_event_duplicates d
WHERE d.source = @source AND d.event_id = @event_id
ORDER BY d.id DESC
LIMIT @max_rows;
