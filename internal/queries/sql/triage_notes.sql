-- switchyard.triage_notes and their versions.

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
