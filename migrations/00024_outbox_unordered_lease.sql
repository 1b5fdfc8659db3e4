-- +goose Up

-- An unordered message's lease expiry moves from next_attempt_at, which
-- outbox_due_unordered indexes, to leased_until, which nothing indexes:
-- the claim then changes no indexed column and PostgreSQL can write the
-- row's new version on its page without a new entry in each of the
-- outbox's indexes (a HOT update), if the page has room for it. A claim
-- leases the oldest due messages, which lie side by side on the same
-- pages, in one transaction (nothing of what it replaces can be pruned
-- before it ends): a page has room for a new version of each of its rows
-- only if it is filled to less than half. At fillfactor 70 most of a
-- claim's updates found the page full and wrote an entry in each of six
-- indexes; at 45 they stay on their page. The cost is space: a newly
-- written page is filled to 45 %, not 70 % (about two thirds as many rows
-- a page; vacuumed pages are filled again to that mark). Unordered
-- drains, which were slower than ordered ones, gained about a third;
-- ordered drains, whose claims write only each aggregate's head, did not
-- change (BENCHMARKS.md, "Claims and finalizes that cost what they
-- touch").
--
-- next_attempt_at stays when the message is due; a due message is
-- claimable when its lease is not held (leased_until NULL or past). The
-- claim steps over the leased messages at the front of
-- outbox_due_unordered: as many as are in flight, checked on their rows.
-- A message leased before this migration keeps its expiry in
-- next_attempt_at, which still holds it until then.
--
-- Upgrading: stop the dispatchers of earlier builds before this build
-- starts dispatching (README.md, "Migrations"). An earlier build's claim
-- reads next_attempt_at as the lease: it would take over, and deliver a
-- second time, every unordered message this build has leased.
ALTER TABLE switchyard.outbox ADD COLUMN leased_until timestamptz;
ALTER TABLE switchyard.outbox SET (fillfactor = 45);

-- +goose Down
-- No claim may lease between the update and the column's drop.
LOCK TABLE switchyard.outbox IN ACCESS EXCLUSIVE MODE;
UPDATE switchyard.outbox SET next_attempt_at = greatest(next_attempt_at, leased_until)
WHERE leased_until IS NOT NULL AND state = 'pending';
ALTER TABLE switchyard.outbox DROP COLUMN leased_until;
ALTER TABLE switchyard.outbox SET (fillfactor = 70);
