-- +goose Up

-- Indexes for the console's message browser (internal/console/EXPLAIN.md
-- holds the plan of every list query at 1,000,000 rows). Each list walks an
-- index in id order, newest first, so a page of 50 reads about 50 rows
-- whatever the table's size.
--
-- Partial indexes where the set is small: only pending, dead, discarded or
-- failing rows have an entry, so the delivered history (most of the table)
-- costs them nothing, and a finalize that delivers a message adds no entry.
-- Discards are rare and a message enters that set by an operator's action,
-- never by the dispatcher.
CREATE INDEX outbox_pending_id ON switchyard.outbox (id) WHERE state = 'pending';
CREATE INDEX outbox_dead_id ON switchyard.outbox (id) WHERE state = 'dead';
CREATE INDEX outbox_discarded_id ON switchyard.outbox (id) WHERE state = 'discarded';
CREATE INDEX outbox_failed_id ON switchyard.outbox (id) WHERE last_error IS NOT NULL;

-- Filters by topic and destination, which a rare value would otherwise
-- answer by walking the whole table; only over messages that are not
-- delivered. A full index would take an entry at every finalize (its update
-- is never HOT: it changes state) and cost the dispatcher about a third of
-- its throughput (measured: BENCHMARKS.md). Delivered history filtered by
-- topic or destination is searched in windows of ids instead
-- (internal/console/messages_list.go).
CREATE INDEX outbox_topic_id ON switchyard.outbox (topic, id) WHERE state <> 'delivered';
CREATE INDEX outbox_destination_id ON switchyard.outbox (destination, id) WHERE state <> 'delivered';

-- The blocked aggregates page, oldest first (keyset).
CREATE INDEX outbox_blocked_aggregates_since ON switchyard.outbox_blocked_aggregates
    (blocked_at, destination, aggregate_type, aggregate_id);

-- The console's inbox page lists events that want attention (failed,
-- parked, stale, held) newest first with a keyset on id, and the statistics
-- leader counts them per source and status. Processed events, the vast
-- majority, stay out of this index, so it stays as small as the set of
-- events that need a look; the list of all or of processed events walks
-- the primary key instead.
CREATE INDEX inbox_events_attention ON switchyard.inbox_events (status, id DESC)
    WHERE status <> 'processed';

-- What a row of the message list shows: every column but the payload and
-- headers. The list queries read through it so that sqlc gives them all one
-- row type; PostgreSQL inlines the view, so they use the indexes above.
--
-- status and replay_outcome are the console's states of a message, defined
-- once here and used by every list and filter (internal/console):
--   pending, delivered  as stored;
--   dead                dead and unresolved: never replayed (what the
--                       dead-letter groups count);
--   replayed            dead, then replayed: replay_outcome is the state of
--                       its newest replay (pending, delivered, dead,
--                       discarded; '' for a message never replayed);
--   discarded           archived by an operator.
-- A new column goes at the end: CREATE OR REPLACE VIEW keeps the old ones
-- in place.
CREATE VIEW switchyard.console_messages AS
SELECT o.id, o.message_id, o.topic, o.destination, o.aggregate_type, o.aggregate_id, o.aggregate_seq,
    o.state, o.attempts, o.last_error, o.error_fingerprint, o.created_at, o.finished_at, o.replay_of,
    (CASE WHEN o.state = 'dead' AND o.replays > 0 THEN 'replayed' ELSE o.state END)::text AS status,
    coalesce(CASE WHEN o.replays > 0 THEN
        (SELECT r.state FROM switchyard.outbox r WHERE r.replay_of = o.id ORDER BY r.id DESC LIMIT 1)
    END, '')::text AS replay_outcome
FROM switchyard.outbox o;

-- +goose Down
DROP VIEW switchyard.console_messages;
DROP INDEX switchyard.inbox_events_attention;
DROP INDEX switchyard.outbox_blocked_aggregates_since;
DROP INDEX switchyard.outbox_destination_id;
DROP INDEX switchyard.outbox_topic_id;
DROP INDEX switchyard.outbox_failed_id;
DROP INDEX switchyard.outbox_discarded_id;
DROP INDEX switchyard.outbox_dead_id;
DROP INDEX switchyard.outbox_pending_id;
