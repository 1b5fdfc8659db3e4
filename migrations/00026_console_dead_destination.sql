-- +goose Up

-- The message browser's destination prefix under the dead state
-- (`?state=dead&destination=shop-*`, the dead letters of one family of
-- destinations) walked outbox_destination_id, which holds every message
-- not delivered: each destination's walk read its backlog before its dead
-- letters, and the planner, expecting a few hundred entries, read all of
-- one destination's and sorted them: 160 ms a page at 1,000,000 rows
-- (BENCHMARKS.md, "Pages at ten million rows"). This partial index holds
-- the dead letters only (ConsoleMessagesListDeadDestinationPrefix*), as
-- outbox_dead_topic_id does for topics (migration 00025, whose notes on
-- its cost apply: the dispatcher's claims, heartbeats and deliveries never
-- write it; building it holds off enqueues while it reads the outbox).
CREATE INDEX outbox_dead_destination_id ON switchyard.outbox (destination text_pattern_ops, id) WHERE state = 'dead';

-- +goose Down
DROP INDEX switchyard.outbox_dead_destination_id;
