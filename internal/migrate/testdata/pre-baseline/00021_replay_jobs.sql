-- +goose Up

-- Bulk replay by filter: a background job that replays, through
-- outbox.Replay, every dead message matching a filter (a dead-letter group,
-- or any message filter), at a rate, with progress, cancel, and resume after
-- a restart. See internal/bulkreplay.
--
-- The job walks the matching dead messages in id order up to upper_id (the
-- newest message when it was created), so the replays it creates, and their
-- own failures, are never picked up again by the same job: no silent loop.
-- Each replay's request id is derived from (job, message), so a batch that is
-- repeated after a crash creates nothing twice (invariant 6).
--
-- One active job per filter: filter_key is the filter's canonical text, and
-- the partial unique index refuses a second running job for it.
CREATE TABLE switchyard.replay_jobs (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    filter        jsonb NOT NULL,
    filter_key    text NOT NULL,
    mode          text NOT NULL CHECK (mode IN ('redeliver', 'reapply')),
    actor         text NOT NULL,
    reason        text NOT NULL DEFAULT '',
    rate_per_sec  integer NOT NULL CHECK (rate_per_sec > 0),
    state         text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'cancelled', 'done')),
    estimate      bigint NOT NULL DEFAULT 0,
    upper_id      bigint NOT NULL,
    cursor_id     bigint NOT NULL DEFAULT 0,
    replayed      bigint NOT NULL DEFAULT 0,
    skipped       bigint NOT NULL DEFAULT 0,
    lease_owner   text,
    lease_version bigint NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz
);
CREATE UNIQUE INDEX replay_jobs_one_running ON switchyard.replay_jobs (filter_key) WHERE state = 'running';
CREATE INDEX replay_jobs_created ON switchyard.replay_jobs (created_at DESC);

-- +goose Down
DROP TABLE switchyard.replay_jobs;
