-- +goose Up

-- Ordered delivery by leasing aggregates instead of filtering messages.
--
-- 00002 found each aggregate's head by walking every pending aggregate on
-- every claim (a skip scan over outbox_pending_ordered): the cost of a claim
-- grew with the number of aggregates that had pending work, including those
-- whose head was in flight, backing off or blocked (see BENCHMARKS.md).
-- Now the per-aggregate sequence row is also the aggregate's work item:
--
--   last_seq       highest aggregate_seq assigned (the enqueue trigger);
--   done_seq       highest aggregate_seq finished (delivered or dead): the
--                  aggregate has work while last_seq > done_seq;
--   due_at         when its head may be attempted: now for fresh work, the
--                  retry time after a failure, the lease expiry while a
--                  worker holds it, and 'infinity' while a dead head blocks
--                  it (unblocking sets it back to now());
--   lease_owner,
--   lease_version  the fencing token of the aggregate: a claim bumps it, and
--                  a finalize or heartbeat that names an older one changes
--                  nothing.
--
-- A claim leases due aggregates with FOR UPDATE SKIP LOCKED through the
-- partial index below, which holds only aggregates with work, and takes the
-- first few pending messages of each; one worker delivers them in order.
-- Idle aggregates (all work done) leave the index; retention deletes their
-- rows, so the table stays as small as the set of busy aggregates.
ALTER TABLE switchyard.outbox_aggregate_seq RENAME TO outbox_aggregates;
ALTER TABLE switchyard.outbox_aggregates RENAME CONSTRAINT outbox_aggregate_seq_pkey TO outbox_aggregates_pkey;
ALTER TABLE switchyard.outbox_aggregates
    ADD COLUMN done_seq bigint NOT NULL DEFAULT 0,
    ADD COLUMN due_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN lease_owner text,
    ADD COLUMN lease_version bigint NOT NULL DEFAULT 0;

-- Every row is updated at each enqueue, claim and finalize of its
-- aggregate: leave room on the page and vacuum early, as for the outbox.
ALTER TABLE switchyard.outbox_aggregates SET (fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

-- Existing aggregates: done up to their first pending message; blocked ones
-- are never due.
UPDATE switchyard.outbox_aggregates a
SET done_seq = coalesce((
        SELECT min(o.aggregate_seq) - 1 FROM switchyard.outbox o
        WHERE o.state = 'pending' AND o.destination = a.destination
          AND o.aggregate_type = a.aggregate_type AND o.aggregate_id = a.aggregate_id), a.last_seq),
    due_at = CASE WHEN EXISTS (
        SELECT 1 FROM switchyard.outbox_blocked_aggregates b
        WHERE b.destination = a.destination AND b.aggregate_type = a.aggregate_type AND b.aggregate_id = a.aggregate_id)
        THEN 'infinity' ELSE now() END;

-- Claims take due work per destination, each within that destination's
-- free delivery slots, so both claim indexes lead with the destination.
CREATE INDEX outbox_aggregates_due ON switchyard.outbox_aggregates (destination, due_at) WHERE last_seq > done_seq;
DROP INDEX switchyard.outbox_due_unordered;
CREATE INDEX outbox_due_unordered ON switchyard.outbox (destination, next_attempt_at)
    WHERE state = 'pending' AND aggregate_id = '';

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

-- A claim of an ordered message now sets only its lease fields and the
-- attempt count, none of them indexed, so the update can stay HOT: its
-- lease expiry is the aggregate's due_at, not the message's next_attempt_at
-- (which still schedules unordered messages).

-- +goose Down
DROP INDEX switchyard.outbox_due_unordered;
CREATE INDEX outbox_due_unordered ON switchyard.outbox (next_attempt_at)
    WHERE state = 'pending' AND aggregate_id = '';
DROP INDEX switchyard.outbox_aggregates_due;
ALTER TABLE switchyard.outbox_aggregates RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor);
ALTER TABLE switchyard.outbox_aggregates
    DROP COLUMN done_seq, DROP COLUMN due_at, DROP COLUMN lease_owner, DROP COLUMN lease_version;
ALTER TABLE switchyard.outbox_aggregates RENAME CONSTRAINT outbox_aggregates_pkey TO outbox_aggregate_seq_pkey;
ALTER TABLE switchyard.outbox_aggregates RENAME TO outbox_aggregate_seq;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION switchyard.outbox_assign_seq() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.aggregate_id = '' THEN
        NEW.aggregate_seq := NULL;
        RETURN NEW;
    END IF;
    INSERT INTO switchyard.outbox_aggregate_seq AS s (destination, aggregate_type, aggregate_id, last_seq)
    VALUES (NEW.destination, NEW.aggregate_type, NEW.aggregate_id, 1)
    ON CONFLICT (destination, aggregate_type, aggregate_id)
        DO UPDATE SET last_seq = s.last_seq + 1
    RETURNING last_seq INTO NEW.aggregate_seq;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
