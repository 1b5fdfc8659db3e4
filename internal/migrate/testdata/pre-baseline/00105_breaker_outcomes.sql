-- +goose Up

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
