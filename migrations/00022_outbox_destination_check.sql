-- +goose Up

-- A message's destination must exist, and a destination with messages
-- must not be removed: the foreign key from outbox.destination kept both
-- by share-locking the destination's row on every enqueue (SELECT ... FOR
-- KEY SHARE). Every enqueue to a destination locks the same row, so under
-- concurrent enqueues each lock turns the row's locker into a new
-- MultiXact holding every current locker: a write of the heap page and
-- its WAL, and of the MultiXact files, per message (issue 13: 190 bytes
-- of WAL per forwarded event, the hot-parent cliff). The check below
-- keeps the same two rules with no row written:
--
-- * An enqueue in READ COMMITTED (the default, and every enqueue of
--   Switchyard's own) shares an advisory lock of its destination until
--   it commits, then looks the destination up. Shared locks do not wait
--   for each other and write nothing. Removing or renaming a destination
--   (internal/action, switchyard.destination_lock_enqueues below) takes that lock
--   exclusively before it counts the destination's messages: it waits
--   for every enqueue in progress to end, so it counts their messages,
--   and holds off new ones until it commits; the lookup of an enqueue
--   that waited runs after the removal committed (READ COMMITTED takes a
--   new snapshot per statement) and refuses the message.
-- * An enqueue in REPEATABLE READ or SERIALIZABLE may look at a snapshot
--   taken before a removal committed, where the destination still exists;
--   it locks the row as the foreign key did, so that a removal waits for
--   it and a removal committed after its snapshot fails it with a
--   serialization error (40001), which such a transaction retries.
--
-- One difference from the foreign key: the check runs as each row is
-- inserted, not at the end of the statement, so one statement cannot both
-- add a destination (in a WITH clause) and enqueue to it; two can.
--
-- The lock is the two-key form (class 1398359124, 'SYDT', and the name's
-- hashtext), which never meets the one-key (bigint) advisory locks of
-- internal/advisory and of the statistics leader. Two names that share a
-- hash only make a removal wait for the other's enqueues.
ALTER TABLE switchyard.outbox DROP CONSTRAINT outbox_destination_fkey;

-- outbox_check_destination refuses a message whose destination does not
-- exist, as described above (the error is the foreign key's: 23503).
-- +goose StatementBegin
CREATE FUNCTION switchyard.outbox_check_destination(destination text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') = 'read committed' THEN
        PERFORM pg_advisory_xact_lock_shared(1398359124, hashtext(destination));
        -- A statement of its own: its snapshot is taken after the lock.
        PERFORM FROM switchyard.destinations d WHERE d.name = outbox_check_destination.destination;
    ELSE
        PERFORM FROM switchyard.destinations d WHERE d.name = outbox_check_destination.destination FOR KEY SHARE;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'destination "%" does not exist', destination
            USING ERRCODE = 'foreign_key_violation', TABLE = 'outbox', COLUMN = 'destination';
    END IF;
END;
$$;
-- +goose StatementEnd

-- destination_lock_enqueues takes the lock above exclusively, for a
-- removal or rename of destination: it waits for the enqueues to it in
-- progress and holds off new ones until the caller's transaction ends.
-- +goose StatementBegin
CREATE FUNCTION switchyard.destination_lock_enqueues(destination text) RETURNS void
LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(1398359124, hashtext(destination));
$$;
-- +goose StatementEnd

-- The insert trigger checks the destination before it gives an ordered
-- message its place in its aggregate (unchanged from 00003).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION switchyard.outbox_assign_seq() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchyard.outbox_check_destination(NEW.destination);
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

-- Nothing in Switchyard moves a message to another destination; a hand-
-- written UPDATE that does is checked like an insert.
-- +goose StatementBegin
CREATE FUNCTION switchyard.outbox_destination_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchyard.outbox_check_destination(NEW.destination);
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_destination_moved BEFORE UPDATE OF destination ON switchyard.outbox
    FOR EACH ROW WHEN (NEW.destination IS DISTINCT FROM OLD.destination)
    EXECUTE FUNCTION switchyard.outbox_destination_moved();

-- +goose Down
DROP TRIGGER outbox_destination_moved ON switchyard.outbox;
DROP FUNCTION switchyard.outbox_destination_moved();
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
DROP FUNCTION switchyard.destination_lock_enqueues(text);
DROP FUNCTION switchyard.outbox_check_destination(text);
ALTER TABLE switchyard.outbox ADD CONSTRAINT outbox_destination_fkey
    FOREIGN KEY (destination) REFERENCES switchyard.destinations (name);
