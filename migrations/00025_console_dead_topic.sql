-- +goose Up

-- The message browser's topic prefix under the dead state
-- (`?state=dead&topic=order.*`, the on-call view of one family of dead
-- letters) walked outbox_topic_id, which holds every message not
-- delivered: for each topic in the prefix without a dead letter it read
-- that topic's whole backlog, 100 ms a page at 10,000,000 rows
-- (BENCHMARKS.md, "Pages at ten million rows"). This partial index holds
-- the dead letters only (ConsoleMessagesListDeadTopicPrefix*): a claim,
-- a heartbeat or a delivery never writes it (their rows are not dead), so
-- the dispatcher's drain does not pay for it (ARCHITECTURE.md, Engine);
-- a message that dies adds an entry, as does a new version of a dead
-- letter's row that is not HOT. Built in the migration's transaction (not
-- CONCURRENTLY, like every index here), it holds off enqueues while it
-- reads the outbox (all of it: a partial index still scans every row):
-- upgrade a large outbox at a quiet time.
CREATE INDEX outbox_dead_topic_id ON switchyard.outbox (topic text_pattern_ops, id) WHERE state = 'dead';

-- +goose Down
DROP INDEX switchyard.outbox_dead_topic_id;
