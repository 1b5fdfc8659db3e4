-- +goose Up

-- The check of an UPDATE that names another destination (migration
-- 00022) moves from the insert's BEFORE trigger to an AFTER trigger of its
-- own. PostgreSQL locks every row an UPDATE changes before it calls a
-- table's BEFORE UPDATE row triggers, and it does so whenever such a
-- trigger exists, even one that a column list (UPDATE OF destination)
-- keeps from firing: each claim and each finalize of a message paid a
-- row lock, with its WAL record, before its update (pg_waldump of a
-- finalize of 100 messages: 100 Heap LOCK records beside the 100 updates;
-- none with this change. BENCHMARKS.md, "The row lock that no trigger
-- asked for"). An AFTER row trigger takes no lock, and one whose column
-- list does not match queues nothing.
--
-- The check itself is unchanged: the shared advisory lock of the
-- destination, then its lookup (READ COMMITTED), or a key-share lock of
-- its row (other levels); a removal of the destination either waits for
-- the update's transaction and then sees its message, or commits first
-- and the lookup refuses the update. It runs at the end of the update's
-- statement instead of before each row, and an error still undoes the
-- whole statement.

-- One function still serves both triggers: an enqueue pays for no second
-- call (00022), and the check is written once.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION switchyard.outbox_assign_seq() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
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
        RETURN NULL; -- the AFTER trigger: only checked
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

DROP TRIGGER outbox_assign_seq ON switchyard.outbox;
CREATE TRIGGER outbox_assign_seq BEFORE INSERT ON switchyard.outbox
    FOR EACH ROW EXECUTE FUNCTION switchyard.outbox_assign_seq();
CREATE TRIGGER outbox_check_moved_destination AFTER UPDATE OF destination ON switchyard.outbox
    FOR EACH ROW WHEN (NEW.destination IS DISTINCT FROM OLD.destination)
    EXECUTE FUNCTION switchyard.outbox_assign_seq();

-- +goose Down
DROP TRIGGER outbox_check_moved_destination ON switchyard.outbox;
DROP TRIGGER outbox_assign_seq ON switchyard.outbox;
CREATE TRIGGER outbox_assign_seq BEFORE INSERT OR UPDATE OF destination ON switchyard.outbox
    FOR EACH ROW EXECUTE FUNCTION switchyard.outbox_assign_seq();
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
