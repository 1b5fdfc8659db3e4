-- +goose Up

-- The enqueue trigger numbers an ordered message in its aggregate with a
-- plain UPDATE of the aggregate's row when there is one, and falls back to
-- the upsert only when there is none. INSERT ... ON CONFLICT DO UPDATE
-- locks the conflicting row (heap_lock_tuple, a WAL record of its own)
-- before it updates it; an UPDATE's write is its lock (unless the new
-- version goes to another page, which either form then locks). One WAL
-- record fewer per ordered enqueue (15.1 to 14.1 in pgbench, one message a
-- transaction over 1,000 aggregates), in the business transaction's time.
-- The same rows change in the same way and under the same locks: two
-- enqueues of one aggregate still wait for each other, and number their
-- messages in commit order. Under REPEATABLE READ and SERIALIZABLE the
-- upsert stays (see below).
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
    -- An aggregate that has a row (every message but an aggregate's first,
    -- and its first after OutboxAggregatePrune removed it): an UPDATE,
    -- whose own write locks the row (when the new version fits on the
    -- page). The upsert below, which a new aggregate still takes, first
    -- locks a row it finds in a WAL record of its own: one record more per
    -- ordered enqueue when every enqueue took it (BENCHMARKS.md, "The
    -- aggregate's sequence by UPDATE first").
    -- READ COMMITTED only: under the other levels an UPDATE of a row that
    -- OutboxAggregatePrune removed after the transaction's snapshot fails
    -- to serialize, where the upsert inserts a new row.
    IF current_setting('transaction_isolation') = 'read committed' THEN
        UPDATE switchyard.outbox_aggregates s SET last_seq = s.last_seq + 1
        WHERE s.destination = NEW.destination AND s.aggregate_type = NEW.aggregate_type
          AND s.aggregate_id = NEW.aggregate_id
        RETURNING s.last_seq INTO NEW.aggregate_seq;
        IF FOUND THEN
            RETURN NEW;
        END IF;
    END IF;
    -- New, or pruned: inserted, or updated if another enqueue inserted it
    -- first.
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
