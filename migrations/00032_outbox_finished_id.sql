-- +goose Up

-- One index of delivered messages instead of two. Every delivery's new
-- row version took an entry in both outbox_finished (finished_at: retention
-- and the reconciler's delivery checks) and outbox_delivered_id (id: the
-- console's delivered list, migration 00027); without one of them an
-- ordered drain was 1.079x and an unordered one 1.048x at 6-7 % less of
-- the server's CPU per message (BENCHMARKS.md, "One index of delivered
-- messages fewer, as a bound"). outbox_finished_id serves all three: by
-- (finished_at, id), retention deletes the oldest deliveries, a delivery
-- check walks its window in keyset order, and the delivered list shows
-- the latest delivery first (ConsoleMessagesListDelivered*). Walking ids
-- instead would read, in each retention pass, every delivery newer than
-- its cutoff, and to bound a delivery check every delivery of every
-- destination. Built in the migration's transaction, like every index
-- here: upgrade a large outbox at a quiet time.
CREATE INDEX outbox_finished_id ON switchyard.outbox (finished_at, id) WHERE state = 'delivered';
DROP INDEX switchyard.outbox_finished;
DROP INDEX switchyard.outbox_delivered_id;

-- +goose Down
CREATE INDEX outbox_delivered_id ON switchyard.outbox (id) WHERE state = 'delivered';
CREATE INDEX outbox_finished ON switchyard.outbox (finished_at) WHERE state = 'delivered';
DROP INDEX switchyard.outbox_finished_id;
