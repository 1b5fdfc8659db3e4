-- +goose Up

-- An aggregate's messages, by id, for the console's aggregate view
-- (ConsoleMessagesListAggregate*), in a table of their own that nothing
-- updates, in place of the outbox's index outbox_aggregate
-- (aggregate_type, aggregate_id, id).
--
-- A delivery rewrites its message's row, and the new row version, not
-- HOT (state is indexed), enters every index whose predicate it meets:
-- outbox_aggregate took one entry per delivery, in the aggregate's own
-- place among all its history, so a drain's deliveries scattered over
-- the index and each cost more as the history grew (an aggregate view
-- needs that history). After 10,000,000 delivered messages retained,
-- the ordered drain ran 13-14 % slower than on an empty outbox, the
-- delivery's row update costing 24 % more, all of it that insert
-- (BENCHMARKS.md, "Where the history's cost is"; with this table, 7 %
-- slower in one run). A row here is written once, by the enqueue (the insert trigger,
-- which already upserts the aggregate's sequence), and removed with its
-- message (the delete trigger below): the enqueue pays the one scattered
-- insert the index cost it before, the delivery none.
--
-- No foreign key: the row is written in the outbox insert's BEFORE
-- trigger, before the message's row exists; the id is the message's
-- (defaults are set before BEFORE triggers run). An insert that fails
-- after the trigger rolls the row back with it; one that ON CONFLICT DO
-- NOTHING skips (ReconcileRedeliver's second call with one request id)
-- leaves an entry that names no message, as it leaves the aggregate's
-- sequence advanced: the list joins the outbox and never shows it. Built
-- in the migration's transaction: upgrade a large outbox at a quiet time.
CREATE TABLE switchyard.outbox_aggregate_messages (
    aggregate_type text   NOT NULL,
    aggregate_id   text   NOT NULL,
    message_id     bigint NOT NULL,
    PRIMARY KEY (aggregate_type, aggregate_id, message_id)
);

INSERT INTO switchyard.outbox_aggregate_messages (aggregate_type, aggregate_id, message_id)
SELECT aggregate_type, aggregate_id, id FROM switchyard.outbox WHERE aggregate_id <> '';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION switchyard.outbox_assign_seq() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.destination = OLD.destination THEN
        RETURN NEW;
    END IF;
    IF current_setting('transaction_isolation') = 'read committed' THEN
        PERFORM pg_advisory_xact_lock_shared(1398359124, hashtext(NEW.destination));
        -- A statement of its own: its snapshot is taken after the lock.
        PERFORM FROM switchyard.destinations d WHERE d.name = NEW.destination;
    ELSE
        PERFORM FROM switchyard.destinations d WHERE d.name = NEW.destination FOR KEY SHARE;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'destination "%" does not exist', NEW.destination
            USING ERRCODE = 'foreign_key_violation', TABLE = 'outbox', COLUMN = 'destination';
    END IF;
    IF TG_OP = 'UPDATE' THEN
        RETURN NEW;
    END IF;
    IF NEW.aggregate_id = '' THEN
        NEW.aggregate_seq := NULL;
        RETURN NEW;
    END IF;
    INSERT INTO switchyard.outbox_aggregate_messages (aggregate_type, aggregate_id, message_id)
    VALUES (NEW.aggregate_type, NEW.aggregate_id, NEW.id);
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

-- One statement per delete, however many messages it removes
-- (retention's batches), through the pairs' primary key.
-- +goose StatementBegin
CREATE FUNCTION switchyard.outbox_forget_aggregate_messages() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM switchyard.outbox_aggregate_messages m
    USING removed r
    WHERE r.aggregate_id <> '' AND m.aggregate_type = r.aggregate_type
      AND m.aggregate_id = r.aggregate_id AND m.message_id = r.id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_forget_aggregate_messages AFTER DELETE ON switchyard.outbox
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION switchyard.outbox_forget_aggregate_messages();

DROP INDEX switchyard.outbox_aggregate;

-- +goose Down
CREATE INDEX outbox_aggregate ON switchyard.outbox (aggregate_type, aggregate_id, id) WHERE aggregate_id <> '';
DROP TRIGGER outbox_forget_aggregate_messages ON switchyard.outbox;
DROP FUNCTION switchyard.outbox_forget_aggregate_messages();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION switchyard.outbox_assign_seq() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.destination = OLD.destination THEN
        RETURN NEW;
    END IF;
    IF current_setting('transaction_isolation') = 'read committed' THEN
        PERFORM pg_advisory_xact_lock_shared(1398359124, hashtext(NEW.destination));
        -- A statement of its own: its snapshot is taken after the lock.
        PERFORM FROM switchyard.destinations d WHERE d.name = NEW.destination;
    ELSE
        PERFORM FROM switchyard.destinations d WHERE d.name = NEW.destination FOR KEY SHARE;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'destination "%" does not exist', NEW.destination
            USING ERRCODE = 'foreign_key_violation', TABLE = 'outbox', COLUMN = 'destination';
    END IF;
    IF TG_OP = 'UPDATE' THEN
        RETURN NEW;
    END IF;
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
DROP TABLE switchyard.outbox_aggregate_messages;
