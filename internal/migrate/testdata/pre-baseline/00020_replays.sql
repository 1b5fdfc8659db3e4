-- +goose Up

-- Operator actions on dead messages, always through the outbox: a replay is
-- a NEW row pointing to the original (replay_of); the original stays, dead,
-- and is marked replayed. See internal/outbox/replay.go.
--
--   delivery_key    the idempotency key sent downstream when it is not the
--                   row's own message_id: a replay in "redeliver" mode
--                   carries the original's key, so the destination dedupes;
--                   "reapply" gets a fresh one.
--   replay_request  the client-generated id of the replay request: a request
--                   creates at most one row, whatever the retries (invariant 6).
--   replay_mode, replay_actor, replay_reason
--                   who asked for it, how and why (the audit row says so too).
--   replayed_at, replays
--                   on the original: when it was last replayed, how often.
--   generation      0 for a message as enqueued, the original's + 1 for a
--                   replay: a replay that dies again shows how often it was
--                   replayed instead of looping silently.
ALTER TABLE switchyard.outbox
    ADD COLUMN delivery_key uuid,
    ADD COLUMN replay_request uuid,
    ADD COLUMN replay_mode text CHECK (replay_mode IN ('redeliver', 'reapply')),
    ADD COLUMN replay_actor text,
    ADD COLUMN replay_reason text,
    ADD COLUMN replayed_at timestamptz,
    ADD COLUMN replays integer NOT NULL DEFAULT 0,
    ADD COLUMN generation integer NOT NULL DEFAULT 0;

-- A discarded message is archived: out of the dead letters, restorable.
ALTER TABLE switchyard.outbox DROP CONSTRAINT outbox_state_check;
ALTER TABLE switchyard.outbox ADD CONSTRAINT outbox_state_check
    CHECK (state IN ('pending', 'delivered', 'dead', 'discarded'));

CREATE UNIQUE INDEX outbox_replay_request ON switchyard.outbox (replay_request) WHERE replay_request IS NOT NULL;
-- At most one replay of a message in flight: the database refuses a second.
CREATE UNIQUE INDEX outbox_one_pending_replay ON switchyard.outbox (replay_of) WHERE replay_of IS NOT NULL AND state = 'pending';
-- Deep links by idempotency key find redeliveries too.
CREATE INDEX outbox_delivery_key ON switchyard.outbox (delivery_key) WHERE delivery_key IS NOT NULL;
-- Replays and discards ask whether a message blocks its aggregate; retention's
-- foreign-key check asks the same of every message it deletes.
CREATE INDEX outbox_blocked_aggregates_dead_message ON switchyard.outbox_blocked_aggregates (dead_message_id);

-- The per-aggregate sequence: a replay of an aggregate's dead head takes
-- the head's place (its aggregate_seq), so it is delivered before the
-- messages that waited behind it. Only a replay may bring its own number.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION switchyard.outbox_assign_seq() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.aggregate_id = '' THEN
        NEW.aggregate_seq := NULL;
        RETURN NEW;
    END IF;
    IF NEW.replay_of IS NOT NULL AND NEW.aggregate_seq IS NOT NULL THEN
        RETURN NEW;
    END IF;
    INSERT INTO switchyard.outbox_aggregates AS s (destination, aggregate_type, aggregate_id, last_seq)
    VALUES (NEW.destination, NEW.aggregate_type, NEW.aggregate_id, 1)
    ON CONFLICT (destination, aggregate_type, aggregate_id)
        DO UPDATE SET last_seq = s.last_seq + 1
    RETURNING last_seq INTO NEW.aggregate_seq;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION switchyard.outbox_assign_seq() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.aggregate_id = '' THEN
        NEW.aggregate_seq := NULL;
        RETURN NEW;
    END IF;
    INSERT INTO switchyard.outbox_aggregates AS s (destination, aggregate_type, aggregate_id, last_seq)
    VALUES (NEW.destination, NEW.aggregate_type, NEW.aggregate_id, 1)
    ON CONFLICT (destination, aggregate_type, aggregate_id)
        DO UPDATE SET last_seq = s.last_seq + 1
    RETURNING last_seq INTO NEW.aggregate_seq;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
DROP INDEX switchyard.outbox_blocked_aggregates_dead_message;
DROP INDEX switchyard.outbox_delivery_key;
DROP INDEX switchyard.outbox_one_pending_replay;
DROP INDEX switchyard.outbox_replay_request;
UPDATE switchyard.outbox SET state = 'dead' WHERE state = 'discarded';
ALTER TABLE switchyard.outbox DROP CONSTRAINT outbox_state_check;
ALTER TABLE switchyard.outbox ADD CONSTRAINT outbox_state_check CHECK (state IN ('pending', 'delivered', 'dead'));
ALTER TABLE switchyard.outbox
    DROP COLUMN delivery_key, DROP COLUMN replay_request, DROP COLUMN replay_mode, DROP COLUMN replay_actor,
    DROP COLUMN replay_reason, DROP COLUMN replayed_at, DROP COLUMN replays, DROP COLUMN generation;
