-- +goose Up

-- Running dispatchers. Each upserts its row at start and every few seconds
-- (heartbeat_at, leases_held); the console shows heartbeat age, and a row
-- whose heartbeat is old belongs to a dispatcher that died.
CREATE TABLE switchyard.dispatchers (
    owner        text PRIMARY KEY,
    host         text NOT NULL,
    pid          integer NOT NULL,
    workers      integer NOT NULL,
    leases_held  integer NOT NULL DEFAULT 0,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    stopped_at   timestamptz
);

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

-- Circuit breaker state changes, per destination and dispatcher.
CREATE TABLE switchyard.breaker_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    destination text NOT NULL,
    owner       text NOT NULL,
    from_state  text NOT NULL,
    to_state    text NOT NULL,
    changed_at  timestamptz NOT NULL
);
CREATE INDEX breaker_events_destination ON switchyard.breaker_events (destination, changed_at DESC);

-- Retention deletes delivered messages by age.
CREATE INDEX outbox_finished ON switchyard.outbox (finished_at) WHERE state = 'delivered';

-- +goose Down
DROP INDEX switchyard.outbox_finished;
DROP TABLE switchyard.breaker_events;
DROP TABLE switchyard.delivery_stats;
DROP TABLE switchyard.dispatchers;
