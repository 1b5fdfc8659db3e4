-- switchyard.triage_reopen_pending: failures that came while a mutation
-- held their item (migrations/00018_triage_reopen_race.sql).

-- name: TriageReopenPendingApply :one
-- TriageReopenPendingApply reopens the items that a mutation settled while
-- one of these failures came, waiting for such a mutation to commit; it
-- returns how many items it reopened.
SELECT switchyard.triage_reopen_pending_apply(@max_items::integer)::integer AS reopened;
