-- switchyard.audit_seals: HMAC seals over audit rows. See internal/audit.

-- name: AuditSealHeadGet :one
-- AuditSealHeadGet is the newest sealed row: its id, hash and seal.
SELECT s.id, s.mac, a.hash
FROM switchyard.audit_seals s JOIN switchyard.audit_log a ON a.id = s.id
ORDER BY s.id DESC
LIMIT 1;

-- name: AuditListUnsealed :many
-- AuditListUnsealed lists up to @max_rows rows after row @after_id, in chain
-- order, with their links: the rows to seal next.
SELECT a.id, a.prev_hash, a.hash FROM switchyard.audit_log a
WHERE a.id > @after_id
ORDER BY a.id
LIMIT @max_rows;

-- name: AuditSealInsert :exec
-- AuditSealInsert stores seals; a row sealed already (by another
-- instance) keeps its seal.
INSERT INTO switchyard.audit_seals (id, mac)
SELECT unnest(@ids::bigint[]), unnest(@macs::bytea[])
ON CONFLICT (id) DO NOTHING;

-- name: AuditListSealedRows :many
-- AuditListSealedRows lists up to @max_rows rows after row @after_id, in chain
-- order, with their seal (NULL: none).
SELECT a.id, a.hash, s.mac FROM switchyard.audit_log a
LEFT JOIN switchyard.audit_seals s ON s.id = a.id
WHERE a.id > @after_id
ORDER BY a.id
LIMIT @max_rows;

-- name: AuditSealCountOrphans :one
-- AuditSealCountOrphans counts seals whose row is gone, and names the first.
SELECT count(*)::bigint AS orphans, coalesce(min(s.id), 0)::bigint AS first_id
FROM switchyard.audit_seals s
WHERE NOT EXISTS (SELECT 1 FROM switchyard.audit_log a WHERE a.id = s.id);
