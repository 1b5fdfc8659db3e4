-- +goose Up

-- The outbox. A service inserts rows here in the same transaction as its
-- business change (the public contract, see README.md):
--
--   INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload)
--   VALUES ('order.created', 'billing', 'order', '42', '{"id": 42}');
--
-- message_id is the idempotency key sent with every delivery attempt.
-- Messages with an aggregate_id are delivered in aggregate_seq order within
-- (destination, aggregate_type, aggregate_id); the trigger below assigns it.
-- Those without one are unordered.
--
-- Claiming leases a row: lease_version + 1, lease_owner, and
-- next_attempt_at = lease expiry, so an expired lease is simply due again.
-- Only the holder of the current lease_version can finalize (fencing).
-- An ordered message is claimed through its aggregate (outbox_aggregates
-- below): its claim sets only its lease fields and the attempt count, none
-- of them indexed, so the update can stay HOT; its lease expiry is the
-- aggregate's due_at, and next_attempt_at schedules unordered messages only.
--
-- A destination cannot be renamed while messages name it (no ON UPDATE
-- CASCADE): the sequence and blocked-aggregate rows are keyed by the name.
--
-- Operator actions on dead messages go through the outbox too: a replay is
-- a NEW row pointing to the original (replay_of); the original stays, dead,
-- and is marked replayed. A discarded message is archived: out of the dead
-- letters, restorable. See internal/outbox/replay.go.
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
--   replay_job      the bulk replay job (switchyard.replay_jobs) that created
--                   a replay; NULL for a single replay and for every
--                   ordinary message.
--
-- Each row is updated at claim and at finalize, two or three times within
-- seconds of its insert. A claim of an ordered message changes no indexed
-- column, so it is HOT if the row's page has room for the new version; the
-- console's indexes (00011_console.sql) make every non-HOT update dearer.
-- fillfactor 70 leaves that room on each page, and the aggressive
-- autovacuum scale factors (2 % instead of 20 %) keep up with the updates.
-- The claim indexes below are partial on state = 'pending', so the
-- delivered history does not weigh on them; delivered rows are removed by
-- retention.
CREATE TABLE switchyard.outbox (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id        uuid NOT NULL DEFAULT gen_random_uuid(),
    topic             text NOT NULL CHECK (topic <> ''),
    destination       text NOT NULL REFERENCES switchyard.destinations (name),
    aggregate_type    text NOT NULL DEFAULT '',
    aggregate_id      text NOT NULL DEFAULT '',
    aggregate_seq     bigint,
    payload           jsonb NOT NULL,
    headers           jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(headers) = 'object'),
    state             text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead', 'discarded')),
    attempts          integer NOT NULL DEFAULT 0,
    max_attempts      integer CHECK (max_attempts > 0),
    next_attempt_at   timestamptz NOT NULL DEFAULT now(),
    lease_owner       text,
    lease_version     bigint NOT NULL DEFAULT 0,
    last_error        text,
    error_fingerprint text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz,
    replay_of         bigint REFERENCES switchyard.outbox (id),
    delivery_key      uuid,
    replay_request    uuid,
    replay_mode       text CHECK (replay_mode IN ('redeliver', 'reapply')),
    replay_actor      text,
    replay_reason     text,
    replayed_at       timestamptz,
    replays           integer NOT NULL DEFAULT 0,
    generation        integer NOT NULL DEFAULT 0,
    replay_job        uuid,
    CONSTRAINT outbox_message_id_key UNIQUE (message_id)
) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02, fillfactor = 70);

-- Unordered claim: due pending rows without an aggregate, oldest due
-- first. Claims take due work per destination, each within that
-- destination's free delivery slots, so both claim indexes lead with the
-- destination.
CREATE INDEX outbox_due_unordered ON switchyard.outbox (destination, next_attempt_at)
    WHERE state = 'pending' AND aggregate_id = '';

-- An aggregate's pending messages in order: the claim of a leased
-- aggregate takes its first few here.
CREATE INDEX outbox_pending_ordered ON switchyard.outbox (destination, aggregate_type, aggregate_id, aggregate_seq)
    WHERE state = 'pending' AND aggregate_id <> '';

-- The console's aggregate view and replay lineage.
CREATE INDEX outbox_aggregate ON switchyard.outbox (aggregate_type, aggregate_id, id) WHERE aggregate_id <> '';
CREATE INDEX outbox_replay_of ON switchyard.outbox (replay_of) WHERE replay_of IS NOT NULL;

-- Retention deletes delivered messages by age.
CREATE INDEX outbox_finished ON switchyard.outbox (finished_at) WHERE state = 'delivered';

-- A dead-letter group's messages, newest first, for its page (keyset on id).
CREATE INDEX outbox_dead_fingerprint ON switchyard.outbox (error_fingerprint, id DESC) WHERE state = 'dead';

CREATE UNIQUE INDEX outbox_replay_request ON switchyard.outbox (replay_request) WHERE replay_request IS NOT NULL;
-- At most one replay of a message in flight: the database refuses a second.
CREATE UNIQUE INDEX outbox_one_pending_replay ON switchyard.outbox (replay_of) WHERE replay_of IS NOT NULL AND state = 'pending';
-- Deep links by idempotency key find redeliveries too.
CREATE INDEX outbox_delivery_key ON switchyard.outbox (delivery_key) WHERE delivery_key IS NOT NULL;

-- A job's page counts its replays by state through this, so it shows how
-- many were delivered, died again or are pending as they settle. Partial:
-- ordinary messages have no entry, so the dispatcher's finalize of them
-- adds nothing; only a job's replays take one entry per state change.
CREATE INDEX outbox_replay_job ON switchyard.outbox (replay_job, state) WHERE replay_job IS NOT NULL;

-- Ordered delivery leases aggregates instead of filtering messages: finding
-- each aggregate's head by walking every pending aggregate on every claim
-- (a skip scan) made the cost of a claim grow with the number of
-- aggregates that had pending work, including those whose head was in
-- flight, backing off or blocked (see BENCHMARKS.md). So one row per
-- aggregate is both its sequence and its work item:
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
-- The trigger's upsert locks the aggregate's row until the enqueuing
-- transaction ends, so two transactions enqueueing for one aggregate are
-- numbered in commit order: a message can never be seen before one that
-- was enqueued (and committed) ahead of it.
--
-- A claim leases due aggregates with FOR UPDATE SKIP LOCKED through the
-- partial index below, which holds only aggregates with work, and takes the
-- first few pending messages of each; one worker delivers them in order.
-- Idle aggregates (all work done) leave the index; retention deletes their
-- rows, so the table stays as small as the set of busy aggregates.
--
-- Every row is updated at each enqueue, claim and finalize of its
-- aggregate: leave room on the page and vacuum early, as for the outbox.
CREATE TABLE switchyard.outbox_aggregates (
    destination    text NOT NULL,
    aggregate_type text NOT NULL,
    aggregate_id   text NOT NULL,
    last_seq       bigint NOT NULL,
    done_seq       bigint NOT NULL DEFAULT 0,
    due_at         timestamptz NOT NULL DEFAULT now(),
    lease_owner    text,
    lease_version  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (destination, aggregate_type, aggregate_id)
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
CREATE INDEX outbox_aggregates_due ON switchyard.outbox_aggregates (destination, due_at) WHERE last_seq > done_seq;

-- The per-aggregate sequence. A replay of an aggregate's dead head takes
-- the head's place (its aggregate_seq), so it is delivered before the
-- messages that waited behind it. Only a replay may bring its own number.
-- +goose StatementBegin
CREATE FUNCTION switchyard.outbox_assign_seq() RETURNS trigger
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

CREATE TRIGGER outbox_assign_seq BEFORE INSERT ON switchyard.outbox
    FOR EACH ROW EXECUTE FUNCTION switchyard.outbox_assign_seq();

-- An aggregate whose head went dead: its later messages wait until an
-- operator replays or discards the head. Written in the same statement that
-- makes the head dead.
CREATE TABLE switchyard.outbox_blocked_aggregates (
    destination     text NOT NULL,
    aggregate_type  text NOT NULL,
    aggregate_id    text NOT NULL,
    dead_message_id bigint NOT NULL REFERENCES switchyard.outbox (id),
    blocked_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (destination, aggregate_type, aggregate_id)
);
-- Replays and discards ask whether a message blocks its aggregate; retention's
-- foreign-key check asks the same of every message it deletes.
CREATE INDEX outbox_blocked_aggregates_dead_message ON switchyard.outbox_blocked_aggregates (dead_message_id);

-- Every delivery attempt, including those whose finalize was fenced off
-- (applied = false): the delivery happened, the record says so.
CREATE TABLE switchyard.outbox_attempts (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id    bigint NOT NULL REFERENCES switchyard.outbox (id) ON DELETE CASCADE,
    attempt       integer NOT NULL,
    worker        text NOT NULL,
    lease_version bigint NOT NULL,
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz NOT NULL,
    outcome       text NOT NULL CHECK (outcome IN ('delivered', 'retry', 'dead', 'released')),
    applied       boolean NOT NULL,
    status_code   integer,
    response      text,
    error         text,
    duration_ms   double precision NOT NULL
);
CREATE INDEX outbox_attempts_message ON switchyard.outbox_attempts (message_id, id);
CREATE INDEX outbox_attempts_finished ON switchyard.outbox_attempts (finished_at);

-- Delivery outcomes per second, destination and topic, written by the
-- finalize statement. The dashboard reads these instead of counting the
-- message tables. worker is part of the key so that concurrent finalizes
-- never wait on each other's row.
CREATE TABLE switchyard.delivery_stats (
    second      timestamptz NOT NULL,
    destination text NOT NULL,
    topic       text NOT NULL,
    worker      text NOT NULL,
    delivered   integer NOT NULL DEFAULT 0,
    retried     integer NOT NULL DEFAULT 0,
    dead        integer NOT NULL DEFAULT 0,
    latency_ms_sum double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (second, destination, topic, worker)
);

-- Dead letters grouped by error fingerprint, maintained by the finalize
-- statement that makes messages dead, so that the console lists groups
-- (count, first and last seen, destinations, a sample) without counting the
-- outbox. Replays and discards (operator actions) take messages out of a
-- group and lower its count in the same transaction.
CREATE TABLE switchyard.dead_letter_groups (
    fingerprint   text PRIMARY KEY,
    dead          integer NOT NULL CHECK (dead >= 0),
    first_dead_at timestamptz NOT NULL,
    last_dead_at  timestamptz NOT NULL,
    sample_id     bigint NOT NULL,  -- the latest dead message of the group
    sample_error  text NOT NULL DEFAULT '',
    destinations  text[] NOT NULL DEFAULT '{}'
);
CREATE INDEX dead_letter_groups_last ON switchyard.dead_letter_groups (last_dead_at DESC, fingerprint);

-- The trend of each group: messages that went dead per hour.
CREATE TABLE switchyard.dead_letter_hours (
    fingerprint text NOT NULL,
    hour        timestamptz NOT NULL,
    dead        integer NOT NULL,
    PRIMARY KEY (fingerprint, hour)
);

-- +goose Down
DROP TABLE switchyard.dead_letter_hours;
DROP TABLE switchyard.dead_letter_groups;
DROP TABLE switchyard.delivery_stats;
DROP TABLE switchyard.outbox_attempts;
DROP TABLE switchyard.outbox_blocked_aggregates;
DROP TRIGGER outbox_assign_seq ON switchyard.outbox;
DROP FUNCTION switchyard.outbox_assign_seq();
DROP TABLE switchyard.outbox_aggregates;
DROP TABLE switchyard.outbox;
