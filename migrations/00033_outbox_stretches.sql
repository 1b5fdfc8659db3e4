-- +goose Up

-- A stretch is one unordered claim's lease on the first tries it took of
-- one destination (messages without an aggregate, attempts = 0): one row
-- for all of them, where each message's row took a lease of its own (a
-- HOT update and a row lock each: 224 bytes of WAL a message). The claim
-- reads those messages and writes none of them; the stretch's ids keep
-- every later claim off them while it lives, as an aggregate's lease keeps
-- claims off the messages behind its head (BENCHMARKS.md, "Stretches of
-- ids").
--
-- A list of ids, not a range: ids are taken in one order and committed in
-- another, so a range would skip a message committed late below it.
--
-- Its life: the claim inserts it (its claims of a destination take turns
-- across processes under an advisory lock, so that each sees every
-- stretch committed before it); the heartbeat pushes leased_until; the
-- finalize of its last message deletes it. A claim that finds it expired
-- (its dispatcher died, or lost the database) deletes it and writes each
-- of its messages still pending at attempts 0 an attempt and a new lease
-- version: the attempt the dead dispatcher may have made, and a fence
-- against its finalize. Those messages are then retries, leased one by
-- one.
--
-- Deleting a destination takes its stretches along (it refuses while any
-- of its messages is pending).
--
-- Upgrading: stop the dispatchers of earlier builds before this build
-- starts dispatching (README.md, "Migrations"). An earlier build's claim
-- does not read the stretches: it would lease first tries that this
-- build's stretches hold, and deliver them a second time.
CREATE TABLE switchyard.outbox_stretches (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    destination text NOT NULL REFERENCES switchyard.destinations (name) ON DELETE CASCADE,
    owner text NOT NULL,
    leased_until timestamptz NOT NULL,
    ids bigint[] NOT NULL
);

-- A claim reads the stretches of its destinations: few rows, as many as
-- claims in flight. leased_until is left out, so that a heartbeat's
-- update is HOT.
CREATE INDEX outbox_stretches_destination ON switchyard.outbox_stretches (destination);

-- +goose Down
DROP TABLE switchyard.outbox_stretches;
