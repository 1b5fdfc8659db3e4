-- +goose Up

-- Where messages go. A message names its destination; the dispatcher knows
-- how to reach it (kind, address) and how hard to try (retry policy,
-- rate, concurrency, circuit breaker). Secrets are never stored here:
-- secret_ref names where the running process finds the signing secret.
CREATE TABLE switchyard.destinations (
    name                  text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    kind                  text NOT NULL CHECK (kind IN ('webhook', 'jetstream', 'function')),
    address               text NOT NULL DEFAULT '',
    secret_ref            text NOT NULL DEFAULT '',
    retry_base_ms         integer NOT NULL DEFAULT 1000 CHECK (retry_base_ms > 0),
    retry_cap_ms          integer NOT NULL DEFAULT 600000 CHECK (retry_cap_ms >= retry_base_ms),
    max_attempts          integer NOT NULL DEFAULT 12 CHECK (max_attempts > 0),
    timeout_ms            integer NOT NULL DEFAULT 10000 CHECK (timeout_ms > 0),
    rate_per_second       double precision NOT NULL DEFAULT 0 CHECK (rate_per_second >= 0),
    burst                 integer NOT NULL DEFAULT 1 CHECK (burst > 0),
    concurrency           integer NOT NULL DEFAULT 16 CHECK (concurrency > 0),
    breaker_failure_ratio double precision NOT NULL DEFAULT 0.5 CHECK (breaker_failure_ratio > 0 AND breaker_failure_ratio <= 1),
    breaker_min_requests  integer NOT NULL DEFAULT 10 CHECK (breaker_min_requests > 0),
    breaker_open_ms       integer NOT NULL DEFAULT 30000 CHECK (breaker_open_ms > 0),
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);

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
--
-- A destination cannot be renamed while messages name it (no ON UPDATE
-- CASCADE): the sequence and blocked-aggregate rows are keyed by the name.
--
-- fillfactor 80 leaves room on each page for the updates of claim and
-- finalize, and the aggressive autovacuum scale factors (2 % instead of
-- 20 %) keep up with a table whose rows are each updated two or three
-- times within seconds of their insert. Every index below is partial on state = 'pending', so the
-- delivered history does not weigh on the hot indexes; delivered rows are
-- removed by retention.
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
    state             text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
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
    CONSTRAINT outbox_message_id_key UNIQUE (message_id)
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

-- Unordered claim: due pending rows without an aggregate, oldest due first.
CREATE INDEX outbox_due_unordered ON switchyard.outbox (next_attempt_at)
    WHERE state = 'pending' AND aggregate_id = '';

-- Ordered claim: the head of each aggregate is the first entry of its key
-- here; the claim walks the distinct keys with a skip scan.
CREATE INDEX outbox_pending_ordered ON switchyard.outbox (destination, aggregate_type, aggregate_id, aggregate_seq)
    WHERE state = 'pending' AND aggregate_id <> '';

-- The console's aggregate view and replay lineage.
CREATE INDEX outbox_aggregate ON switchyard.outbox (aggregate_type, aggregate_id, id) WHERE aggregate_id <> '';
CREATE INDEX outbox_replay_of ON switchyard.outbox (replay_of) WHERE replay_of IS NOT NULL;

-- The per-aggregate sequence. The trigger's upsert locks the aggregate's
-- row until the enqueuing transaction ends, so two transactions enqueueing
-- for one aggregate are numbered in commit order: a message can never be
-- seen before one that was enqueued (and committed) ahead of it.
CREATE TABLE switchyard.outbox_aggregate_seq (
    destination    text NOT NULL,
    aggregate_type text NOT NULL,
    aggregate_id   text NOT NULL,
    last_seq       bigint NOT NULL,
    PRIMARY KEY (destination, aggregate_type, aggregate_id)
);

-- +goose StatementBegin
CREATE FUNCTION switchyard.outbox_assign_seq() RETURNS trigger
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

-- +goose Down
DROP TABLE switchyard.outbox_attempts;
DROP TABLE switchyard.outbox_blocked_aggregates;
DROP TRIGGER outbox_assign_seq ON switchyard.outbox;
DROP FUNCTION switchyard.outbox_assign_seq();
DROP TABLE switchyard.outbox_aggregate_seq;
DROP TABLE switchyard.outbox;
DROP TABLE switchyard.destinations;
