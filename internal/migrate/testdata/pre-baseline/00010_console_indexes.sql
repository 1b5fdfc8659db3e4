-- +goose Up

-- Indexes for the console's message browser (internal/console/EXPLAIN.md
-- holds the plan of every list query at 1,000,000 rows). Each list walks an
-- index in id order, newest first, so a page of 50 reads about 50 rows
-- whatever the table's size.
--
-- Partial indexes where the set is small: only pending, dead or failing
-- rows have an entry, so the delivered history (most of the table) costs
-- them nothing, and a finalize that delivers a message adds no entry.
CREATE INDEX outbox_pending_id ON switchyard.outbox (id) WHERE state = 'pending';
CREATE INDEX outbox_dead_id ON switchyard.outbox (id) WHERE state = 'dead';
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

-- What a row of the message list shows: every column but the payload and
-- headers. The list queries read through it so that sqlc gives them all one
-- row type; PostgreSQL inlines the view, so they use the indexes above.
CREATE VIEW switchyard.console_messages AS
SELECT id, message_id, topic, destination, aggregate_type, aggregate_id, aggregate_seq,
    state, attempts, last_error, error_fingerprint, created_at, finished_at, replay_of
FROM switchyard.outbox;

-- +goose Down
DROP VIEW switchyard.console_messages;
DROP INDEX switchyard.outbox_blocked_aggregates_since;
DROP INDEX switchyard.outbox_destination_id;
DROP INDEX switchyard.outbox_topic_id;
DROP INDEX switchyard.outbox_failed_id;
DROP INDEX switchyard.outbox_dead_id;
DROP INDEX switchyard.outbox_pending_id;
