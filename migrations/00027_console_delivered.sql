-- +goose Up

-- The message browser's delivered list (`?state=delivered`) walked the
-- primary key and removed every message not delivered above its first
-- delivered row: under a backlog of 100,000 pending messages, the newest
-- ids, a page read all of them first, 57 ms at 10,000,000 rows
-- (BENCHMARKS.md, "Pages at ten million rows"). This partial index holds
-- the delivered messages by id (ConsoleMessagesListDelivered*). Unlike
-- the dead letters' indexes (migration 00025), every delivery writes it:
-- a finalize that delivers is not HOT (state is indexed), so its new row
-- version gets one more index entry, mostly at the right edge of this
-- index, as deliveries roughly follow id order (an ordered drain of many
-- aggregates' backlogs at once writes inside it). BENCHMARKS.md, "The
-- delivered list on an index of its own", records what that costs the
-- drain. outbox_finished cannot serve the list (it is in
-- delivery time order, for retention and delivery checks). Built in the
-- migration's transaction, like every index here: upgrade a large outbox
-- at a quiet time.
CREATE INDEX outbox_delivered_id ON switchyard.outbox (id) WHERE state = 'delivered';

-- +goose Down
DROP INDEX switchyard.outbox_delivered_id;
