-- switchyard.destination_checks: the last outside check of a destination
-- (a JetStream destination's stream), for the configuration page and the
-- dashboard.

-- name: DestinationCheckSave :exec
INSERT INTO switchyard.destination_checks (destination, problem, checked_at)
VALUES (@destination, @problem, now())
ON CONFLICT (destination) DO UPDATE SET problem = EXCLUDED.problem, checked_at = EXCLUDED.checked_at;

-- name: DestinationCheckDelete :exec
DELETE FROM switchyard.destination_checks WHERE destination = @destination;

-- name: DestinationCheckList :many
SELECT * FROM switchyard.destination_checks ORDER BY destination;

-- name: DestinationCheckListProblems :many
-- DestinationCheckListProblems lists the failed checks of enabled
-- destinations, for the dashboard's status line (a handful of rows at
-- most: one per destination).
SELECT c.destination, c.problem, c.checked_at
FROM switchyard.destination_checks c
JOIN switchyard.destinations d ON d.name = c.destination
WHERE c.problem <> '' AND NOT d.disabled
ORDER BY c.destination;

-- name: DestinationCheckListJetStream :many
-- DestinationCheckListJetStream lists the JetStream destinations with
-- their last verdict ('' passed; NULL never checked), for the background
-- recheck (internal/destcheck).
SELECT d.name, d.address, c.problem
FROM switchyard.destinations d
LEFT JOIN switchyard.destination_checks c ON c.destination = d.name
WHERE d.kind = 'jetstream'
ORDER BY d.name;

-- name: DestinationCheckRecord :execrows
-- DestinationCheckRecord keeps a background recheck's verdict of a
-- JetStream destination whose address is still the one checked: a save
-- that changed it meanwhile made its own check, which stands. 0 rows: the
-- destination changed, or is gone.
INSERT INTO switchyard.destination_checks (destination, problem, checked_at)
SELECT d.name, @problem::text, now()
FROM switchyard.destinations d
WHERE d.name = @destination AND d.kind = 'jetstream' AND d.address = @address
ON CONFLICT (destination) DO UPDATE SET problem = EXCLUDED.problem, checked_at = EXCLUDED.checked_at;
