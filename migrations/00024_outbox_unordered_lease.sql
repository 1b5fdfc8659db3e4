-- +goose Up

-- An unordered message's lease expiry moves from next_attempt_at, which
-- outbox_due_unordered indexes, to leased_until, which nothing indexes:
-- the claim then changes no indexed column and PostgreSQL can write the
-- row's new version on its page without a new entry in each of the
-- outbox's indexes (a HOT update; the table's fillfactor leaves the
-- room). The claim wrote six index entries per message before, and
-- unordered drains were slower than ordered ones (BENCHMARKS.md, "The
-- unordered claim without index writes").
--
-- next_attempt_at stays when the message is due; a due message is
-- claimable when its lease is not held (leased_until NULL or past). The
-- claim steps over the leased messages at the front of
-- outbox_due_unordered: as many as are in flight, checked on their rows.
-- A message leased before this migration keeps its expiry in
-- next_attempt_at, which still holds it until then.
ALTER TABLE switchyard.outbox ADD COLUMN leased_until timestamptz;

-- +goose Down
UPDATE switchyard.outbox SET next_attempt_at = greatest(next_attempt_at, leased_until)
WHERE leased_until IS NOT NULL AND state = 'pending';
ALTER TABLE switchyard.outbox DROP COLUMN leased_until;
