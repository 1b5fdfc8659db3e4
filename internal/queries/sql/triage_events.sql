-- switchyard.triage_events: the append-only log of triage changes.

-- name: TriageEventAppend :exec
INSERT INTO switchyard.triage_events (item_id, version, actor, actor_id, op, mutation_id, detail)
VALUES (@item_id, @version, @actor, sqlc.narg(actor_id), @op, sqlc.narg(mutation_id), @detail);

-- name: TriageEventList :many
-- TriageEventList is an item's history, oldest first.
SELECT * FROM switchyard.triage_events WHERE item_id = @item_id ORDER BY version;
