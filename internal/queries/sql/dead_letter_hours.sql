-- switchyard.dead_letter_hours: hourly dead counts per group (trends).

-- name: DeadLetterHourListTrends :many
-- DeadLetterHourListTrends returns the hourly dead counts of the given
-- groups over the last @hours hours, by the database's clock: slot 0 is the
-- oldest hour, @hours - 1 the current one (primary key (fingerprint, hour)).
SELECT h.fingerprint,
    (sqlc.arg(hours)::int - 1 - (extract(epoch FROM date_trunc('hour', now()) - h.hour) / 3600)::int)::int AS slot,
    h.dead
FROM switchyard.dead_letter_hours h
WHERE h.fingerprint = ANY (sqlc.arg(fingerprints)::text[])
  AND h.hour > date_trunc('hour', now()) - make_interval(hours => sqlc.arg(hours)::int)
ORDER BY h.fingerprint, h.hour;

-- name: DeadLetterHoursPrune :execrows
DELETE FROM switchyard.dead_letter_hours WHERE hour < @cutoff;
