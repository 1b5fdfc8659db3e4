-- switchyard.inbox_entity_versions: the newest version applied per entity,
-- for sources that order by entity.

-- name: InboxEntityVersionLock :one
-- InboxEntityVersionLock returns the entity's applied version (0: none
-- yet) and locks its row until the transaction ends, so that the events of
-- one entity are applied one at a time.
INSERT INTO switchyard.inbox_entity_versions AS v (source, entity_key, version)
VALUES (@source, @entity_key, 0)
ON CONFLICT (source, entity_key) DO UPDATE SET version = v.version
RETURNING version;

-- name: InboxEntityVersionSet :exec
UPDATE switchyard.inbox_entity_versions SET version = @version, updated_at = now()
WHERE source = @source AND entity_key = @entity_key;
