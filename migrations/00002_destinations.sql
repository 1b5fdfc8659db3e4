-- +goose Up

-- Where messages go. A message names its destination; the dispatcher knows
-- how to reach it (kind, address) and how hard to try (retry policy,
-- rate, concurrency, circuit breaker). Secrets are never stored here:
-- secret_ref names where the running process finds the signing secret.
--
-- permanent_statuses: the HTTP statuses that send a webhook message
-- straight to dead. NULL (the default) is the default policy: every 4xx
-- except 401, 403, 404, 408 and 429 (a receiver that rotates its secret or
-- deploys a new route answers 401/403/404 for a while: retried with backoff,
-- not dead-lettered at once). A list replaces the default: exactly those
-- statuses are permanent, '{}' means none is.
--
-- secret_refs: further environment variables holding signing secrets,
-- after secret_ref. Every delivery carries one signature per secret (a
-- space-separated webhook-signature), so a receiver can rotate its key
-- without a gap.
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
    updated_at            timestamptz NOT NULL DEFAULT now(),
    permanent_statuses    integer[]
        CHECK (400 <= ALL (permanent_statuses) AND 599 >= ALL (permanent_statuses)
               AND array_position(permanent_statuses, NULL) IS NULL),
    secret_refs           text[] NOT NULL DEFAULT '{}'
        CHECK (array_position(secret_refs, '') IS NULL AND array_position(secret_refs, NULL) IS NULL)
);

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

-- The circuit breakers' shared window (internal/destination/guard,
-- internal/destination/registry). Each dispatcher counts its deliveries'
-- outcomes per destination in memory and adds them here about once a
-- second, one row per destination, process and second; each breaker then
-- decides on its own outcomes plus the other processes' rows of its
-- window. So a freshly started dispatcher does not decide on its first few
-- outcomes alone (it tripped a 50 % breaker at 30 % errors one time in
-- six), and an outage opens every dispatcher's breaker.
--
-- Logged, although it is health advice, not data: an unlogged table is
-- emptied by crash recovery, and the chaos run showed breakers tripping at
-- 30 % errors right after PostgreSQL restarted, deciding blind again. The
-- cost is a few small writes a second per dispatcher. Rows older than a few
-- minutes are deleted by the processes that write it.
CREATE TABLE switchyard.breaker_outcomes (
    destination text NOT NULL,
    owner       text NOT NULL,
    bucket      timestamptz NOT NULL,
    successes   bigint NOT NULL CHECK (successes >= 0),
    failures    bigint NOT NULL CHECK (failures >= 0),
    PRIMARY KEY (destination, bucket, owner)
);
CREATE INDEX breaker_outcomes_bucket ON switchyard.breaker_outcomes (bucket);

-- +goose Down
DROP TABLE switchyard.breaker_outcomes;
DROP TABLE switchyard.breaker_events;
DROP TABLE switchyard.dispatchers;
DROP TABLE switchyard.destinations;
