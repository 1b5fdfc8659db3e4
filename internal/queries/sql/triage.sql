-- Collaborative triage (internal/triage; schema: migrations/00065_triage.sql).
-- sqlc.narg(now) overrides the database clock in tests; NULL: now().

-- name: TriageMutationBegin :one
-- TriageMutationBegin records a mutation id for the account, first thing in
-- the mutation's transaction. It returns no row when the id is known: then
-- a concurrent duplicate has waited here for the first one's commit, and
-- TriageMutationGet reads the answer it stored.
INSERT INTO switchyard.triage_mutations (account_id, mutation_id, request_hash)
VALUES (@account_id, @mutation_id, @request_hash)
ON CONFLICT (account_id, mutation_id) DO NOTHING
RETURNING created_at;

-- name: TriageMutationGet :one
SELECT request_hash, answer FROM switchyard.triage_mutations
WHERE account_id = @account_id AND mutation_id = @mutation_id;

-- name: TriageMutationAnswer :exec
UPDATE switchyard.triage_mutations SET answer = @answer
WHERE account_id = @account_id AND mutation_id = @mutation_id;

-- name: TriageMutationPrune :execrows
-- TriageMutationPrune forgets answers older than keep_seconds
-- (triage_mutations_created).
DELETE FROM switchyard.triage_mutations WHERE created_at < now() - make_interval(secs => @keep_seconds::float8);

-- name: TriageItemLock :one
-- TriageItemLock reads an item for a mutation and locks it until the
-- transaction ends, with the clock the mutation goes by.
SELECT sqlc.embed(i), coalesce(sqlc.narg(now)::timestamptz, now())::timestamptz AS db_now
FROM switchyard.triage_items i WHERE i.id = @id FOR UPDATE;

-- name: TriageItemGet :one
SELECT * FROM switchyard.triage_items WHERE id = @id;

-- name: TriageItemByRef :one
SELECT * FROM switchyard.triage_items WHERE kind = @kind AND ref = @ref;

-- name: TriageItemsByRefs :many
-- TriageItemsByRefs reads the items of one kind that track refs (a list
-- page shows each row's item; triage_items_tracked).
SELECT * FROM switchyard.triage_items WHERE kind = @kind AND ref = ANY(@refs::jsonb[]);

-- name: TriageItemsByIDs :many
SELECT * FROM switchyard.triage_items WHERE id = ANY(@ids::bigint[]) ORDER BY id;

-- name: TriageItemWrite :one
-- TriageItemWrite stores an item's new state (the read model) and bumps
-- its version; the caller appends the event of that version.
UPDATE switchyard.triage_items SET
    status = @status, ignored_until = sqlc.narg(ignored_until),
    assignee_id = sqlc.narg(assignee_id), assignee_name = sqlc.narg(assignee_name),
    claim_holder_id = sqlc.narg(claim_holder_id), claim_holder_name = sqlc.narg(claim_holder_name),
    claim_expires_at = sqlc.narg(claim_expires_at),
    version = version + 1, updated_at = now()
WHERE id = @id
RETURNING *;

-- name: TriageItemHeartbeat :one
-- TriageItemHeartbeat extends a live claim of its holder; no row: the
-- claim is not theirs (any more). Not an event: the log records who
-- claimed, not that their page stayed open.
UPDATE switchyard.triage_items
SET claim_expires_at = coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => @lease_seconds::float8)
WHERE id = @id AND claim_holder_id = @holder_id
  AND claim_expires_at > coalesce(sqlc.narg(now)::timestamptz, now())
RETURNING claim_expires_at;

-- name: TriageItemList :many
-- TriageItemList is the board: items of the given statuses (all when
-- empty) and kind (all when empty), optionally only one assignee's or
-- only unassigned ones, most recently changed first, after the keyset
-- cursor (updated_at, id).
SELECT * FROM switchyard.triage_items i
WHERE (cardinality(@statuses::text[]) = 0 OR i.status = ANY(@statuses::text[]))
  AND (@kind::text = '' OR i.kind = @kind::text)
  AND (NOT @unassigned::boolean OR i.assignee_id IS NULL)
  AND (sqlc.narg(assignee_id)::bigint IS NULL OR i.assignee_id = sqlc.narg(assignee_id)::bigint)
  AND (sqlc.narg(after_updated)::timestamptz IS NULL
       OR (i.updated_at, i.id) < (sqlc.narg(after_updated)::timestamptz, sqlc.narg(after_id)::bigint))
ORDER BY i.updated_at DESC, i.id DESC
LIMIT @page_size;

-- name: TriageItemCounts :many
-- TriageItemCounts counts items per status: the board's headline (the
-- table holds one row per failure group, not per failure).
SELECT status, count(*)::bigint AS items FROM switchyard.triage_items GROUP BY status;

-- name: TriageEventAppend :exec
INSERT INTO switchyard.triage_events (item_id, version, actor, actor_id, op, mutation_id, detail)
VALUES (@item_id, @version, @actor, sqlc.narg(actor_id), @op, sqlc.narg(mutation_id), @detail);

-- name: TriageEventList :many
-- TriageEventList is an item's history, oldest first.
SELECT * FROM switchyard.triage_events WHERE item_id = @item_id ORDER BY version;

-- name: TriageNoteInsert :one
WITH note AS (
    INSERT INTO switchyard.triage_notes (item_id, author_id, author_name, body)
    VALUES (@item_id, @author_id, @author_name, @body)
    RETURNING *
), first AS (
    INSERT INTO switchyard.triage_note_versions (note_id, version, body, at)
    SELECT n.id, 0, n.body, n.created_at FROM note n
)
SELECT * FROM note;

-- name: TriageNoteLock :one
SELECT n.*, coalesce(sqlc.narg(now)::timestamptz, now())::timestamptz AS db_now
FROM switchyard.triage_notes n WHERE n.id = @id AND n.item_id = @item_id FOR UPDATE;

-- name: TriageNoteEdit :one
-- TriageNoteEdit replaces a note's text and keeps the new version.
WITH note AS (
    UPDATE switchyard.triage_notes SET body = @body, edits = edits + 1, edited_at = now()
    WHERE id = @id
    RETURNING *
), version AS (
    INSERT INTO switchyard.triage_note_versions (note_id, version, body)
    SELECT n.id, n.edits, n.body FROM note n
)
SELECT * FROM note;

-- name: TriageNoteList :many
SELECT * FROM switchyard.triage_notes WHERE item_id = @item_id ORDER BY id;

-- name: TriageDeadGroupMessages :many
-- TriageDeadGroupMessages lists a dead-letter group's dead messages, oldest
-- first, for a replay from its item (outbox_dead_fingerprint).
SELECT id FROM switchyard.outbox
WHERE state = 'dead'
  AND (error_fingerprint = @fingerprint::text OR (@fingerprint::text = '' AND error_fingerprint IS NULL))
ORDER BY id
LIMIT @max_messages;

-- name: TriageBlockedHead :one
-- TriageBlockedHead is the dead message that blocks an aggregate.
SELECT dead_message_id FROM switchyard.outbox_blocked_aggregates
WHERE destination = @destination AND aggregate_type = @aggregate_type AND aggregate_id = @aggregate_id;

-- name: TriageTrack :exec
-- TriageTrack records that a tracked failure happened, in the caller's
-- transaction (switchyard.triage_track: create or reopen the item). The
-- triggers call the function themselves; this is for writers without one
-- (the reconciler's finding groups).
SELECT switchyard.triage_track(@kind::text, @ref::jsonb, @title::text, @why::text);

-- name: TriagePresenceJoin :one
-- TriagePresenceJoin records (or moves) a connection's view and returns
-- the view it had before ('' if none).
WITH old AS (SELECT view FROM switchyard.triage_presence WHERE conn_id = @conn_id)
INSERT INTO switchyard.triage_presence AS p (conn_id, instance, account_id, account_name, view, expires_at)
VALUES (@conn_id, @instance, @account_id, @account_name, @view,
    coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => @ttl_seconds::float8))
ON CONFLICT (conn_id) DO UPDATE SET view = EXCLUDED.view, expires_at = EXCLUDED.expires_at
RETURNING coalesce((SELECT view FROM old), '')::text AS old_view;

-- name: TriagePresenceRefresh :execrows
-- TriagePresenceRefresh extends a connection's presence; 0 rows: it was
-- swept meanwhile (join again).
UPDATE switchyard.triage_presence
SET expires_at = coalesce(sqlc.narg(now)::timestamptz, now()) + make_interval(secs => @ttl_seconds::float8)
WHERE conn_id = @conn_id;

-- name: TriagePresenceLeave :many
DELETE FROM switchyard.triage_presence WHERE conn_id = @conn_id RETURNING view;

-- name: TriagePresenceSweep :many
-- TriagePresenceSweep deletes the presence of connections whose
-- heartbeats stopped (a dead tab or instance) and returns the views they
-- left, once each.
WITH gone AS (
    DELETE FROM switchyard.triage_presence
    WHERE expires_at <= coalesce(sqlc.narg(now)::timestamptz, now())
    RETURNING view
)
SELECT DISTINCT view FROM gone ORDER BY view;

-- name: TriagePresenceList :many
-- TriagePresenceList is who looks at each of the views (distinct
-- accounts, by name).
SELECT DISTINCT view, account_name FROM switchyard.triage_presence
WHERE view = ANY(@views::text[]) AND expires_at > coalesce(sqlc.narg(now)::timestamptz, now())
ORDER BY view, account_name;
