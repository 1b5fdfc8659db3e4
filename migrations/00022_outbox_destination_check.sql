-- +goose Up

-- A message's destination must exist, and a destination with messages
-- must not be removed: the foreign key from outbox.destination kept both
-- by share-locking the destination's row on every enqueue (SELECT ... FOR
-- KEY SHARE). Every enqueue to a destination locks the same row, so under
-- concurrent enqueues each lock turns the row's locker into a new
-- MultiXact holding every current locker: a write of the heap page and
-- its WAL, and of the MultiXact files, per message (issue 13: 190 bytes
-- of WAL per forwarded event, the hot-parent cliff). The checks below
-- keep the same two rules with no row written by an enqueue:
--
-- * An enqueue in READ COMMITTED (the default, and every enqueue of
--   Switchyard's own) shares an advisory lock of its destination until
--   it commits, then looks the destination up. Shared locks do not wait
--   for each other and write nothing. Removing or renaming a destination
--   takes that lock exclusively (switchyard.destination_lock_enqueues,
--   from internal/action before it counts the destination's messages and
--   from the trigger on destinations below): it waits for every enqueue
--   in progress to end, so it counts their messages, and holds off new
--   ones until it commits; the lookup of an enqueue that waited runs
--   after the removal committed (READ COMMITTED takes a new snapshot per
--   statement) and refuses the message. The trigger on destinations then
--   refuses a removal or rename while any message names the destination.
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

-- destination_lock_enqueues takes the lock above exclusively, for a
-- removal or rename of destination, waiting at most timeout_ms for the
-- enqueues to it in progress to end; then it holds off new ones until the
-- caller's transaction ends. It tries instead of queueing: a request
-- waiting in PostgreSQL's lock queue would make every new enqueue to the
-- destination queue behind it (shared requests do not pass a waiting
-- exclusive one), stalling a service's transactions for as long as one
-- slow enqueue lasts. Past the timeout it fails with lock_not_available
-- (55P03); the configuration page says to try again.
-- +goose StatementBegin
CREATE FUNCTION switchyard.destination_lock_enqueues(destination text, timeout_ms integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    deadline timestamptz := clock_timestamp() + make_interval(secs => timeout_ms / 1000.0);
BEGIN
    WHILE NOT pg_try_advisory_xact_lock(1398359124, hashtext(destination)) LOOP
        IF clock_timestamp() >= deadline THEN
            RAISE EXCEPTION 'enqueues to destination "%" still in progress after % ms', destination, timeout_ms
                USING ERRCODE = 'lock_not_available';
        END IF;
        PERFORM pg_sleep(0.01);
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- destinations_keep_messages refuses to remove or rename a destination
-- that a message names, as the foreign key did, whoever asks (the
-- configuration page counts the messages first and says what to do; a
-- hand-written DELETE gets this error). It takes the lock first, so that
-- the enqueues in progress are counted. Like the foreign key's check, the
-- lookup of delivered messages reads the table (no index holds them by
-- destination): a rare administrative statement.
-- +goose StatementBegin
CREATE FUNCTION switchyard.destinations_keep_messages() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.name = OLD.name THEN
        RETURN NEW;
    END IF;
    PERFORM switchyard.destination_lock_enqueues(OLD.name, 5000);
    IF EXISTS (SELECT 1 FROM switchyard.outbox o WHERE o.destination = OLD.name) THEN
        RAISE EXCEPTION 'destination "%" is still named by messages', OLD.name
            USING ERRCODE = 'foreign_key_violation', TABLE = 'destinations', COLUMN = 'name';
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER destinations_keep_messages BEFORE DELETE OR UPDATE OF name ON switchyard.destinations
    FOR EACH ROW EXECUTE FUNCTION switchyard.destinations_keep_messages();

-- The insert trigger refuses a message whose destination does not exist,
-- as described above (the error is the foreign key's: 23503), before it
-- gives an ordered message its place in its aggregate (unchanged from
-- 00003). The check is written here, not in a function of its own, so an
-- enqueue pays for no second call. The trigger also fires on an UPDATE
-- that names the destination (nothing in Switchyard moves a message to
-- another destination; a hand-written UPDATE that does is checked like an
-- insert, and only checked).
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
DROP TRIGGER outbox_assign_seq ON switchyard.outbox;
CREATE TRIGGER outbox_assign_seq BEFORE INSERT OR UPDATE OF destination ON switchyard.outbox
    FOR EACH ROW EXECUTE FUNCTION switchyard.outbox_assign_seq();

-- +goose Down
DROP TRIGGER destinations_keep_messages ON switchyard.destinations;
DROP FUNCTION switchyard.destinations_keep_messages();
DROP TRIGGER outbox_assign_seq ON switchyard.outbox;
CREATE TRIGGER outbox_assign_seq BEFORE INSERT ON switchyard.outbox
    FOR EACH ROW EXECUTE FUNCTION switchyard.outbox_assign_seq();
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
DROP FUNCTION switchyard.destination_lock_enqueues(text, integer);
ALTER TABLE switchyard.outbox ADD CONSTRAINT outbox_destination_fkey
    FOREIGN KEY (destination) REFERENCES switchyard.destinations (name);
