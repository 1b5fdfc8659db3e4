-- +goose Up

-- Reconciliation (internal/reconcile, docs/reconcile.md): checks configured
-- as rows, their cycles, and the drift they find.
--
-- A check compares local keys with a remote HTTP resource. kind 'delivery'
-- walks the messages delivered to destination within window_ms; kind
-- 'table' walks table_schema.table_name by key_column and compares
-- columns. Other kinds are an embedding program's own (reconcile.Kinds).
-- The lease columns make one runner per check across all instances: only
-- the holder of lease_version (the fencing token) may advance its cycles.
CREATE TABLE switchyard.reconcile_checks (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    kind             text NOT NULL CHECK (kind ~ '^[a-z][a-z0-9_]{0,31}$'),
    enabled          boolean NOT NULL DEFAULT true,
    batch_size       integer NOT NULL DEFAULT 500 CHECK (batch_size BETWEEN 1 AND 10000),
    -- remote_rate: remote calls per second (token bucket, burst 1).
    remote_rate      double precision NOT NULL DEFAULT 20 CHECK (remote_rate > 0),
    timeout_ms       integer NOT NULL DEFAULT 5000 CHECK (timeout_ms > 0),
    interval_ms      bigint NOT NULL DEFAULT 3600000 CHECK (interval_ms > 0),
    remote_url       text NOT NULL,
    -- destination: the checked destination (delivery) or where a table
    -- check's repairs go; topic: the topic of those repairs.
    destination      text NOT NULL REFERENCES switchyard.destinations (name),
    topic            text NOT NULL DEFAULT '',
    window_ms        bigint NOT NULL DEFAULT 86400000 CHECK (window_ms > 0),
    table_schema     text NOT NULL DEFAULT '',
    table_name       text NOT NULL DEFAULT '',
    key_column       text NOT NULL DEFAULT '',
    columns          text[] NOT NULL DEFAULT '{}',
    lease_ms         integer NOT NULL DEFAULT 30000 CHECK (lease_ms > 0),
    lease_owner      text,
    lease_version    bigint NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    next_cycle_at    timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    CHECK (kind <> 'table' OR (table_name <> '' AND key_column <> '' AND cardinality(columns) > 0))
);

-- A cycle walks every key of its check up to upper_key, fixed when it
-- started (NULL: the source was empty), after cursor_key, persisted after
-- every batch. A cycle ends 'complete' (every key examined) or
-- 'incomplete' (unexamined lists the key ranges (after, through] it could
-- not check; unknown counts their keys read locally).
CREATE TABLE switchyard.reconcile_cycles (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    check_id       bigint NOT NULL REFERENCES switchyard.reconcile_checks (id) ON DELETE CASCADE,
    state          text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'complete', 'incomplete')),
    started_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    since          timestamptz,
    upper_key      text,
    cursor_key     text,
    estimate       bigint NOT NULL DEFAULT 0,
    examined       bigint NOT NULL DEFAULT 0,
    in_sync        bigint NOT NULL DEFAULT 0,
    missing_remote bigint NOT NULL DEFAULT 0,
    missing_local  bigint NOT NULL DEFAULT 0,
    mismatch       bigint NOT NULL DEFAULT 0,
    unknown        bigint NOT NULL DEFAULT 0,
    remote_calls   bigint NOT NULL DEFAULT 0,
    unexamined     jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(unexamined) = 'array'),
    last_error     text NOT NULL DEFAULT '',
    runs           integer NOT NULL DEFAULT 1
);
CREATE INDEX reconcile_cycles_check ON switchyard.reconcile_cycles (check_id, id DESC);
-- At most one running cycle per check.
CREATE UNIQUE INDEX reconcile_cycles_one_running ON switchyard.reconcile_cycles (check_id) WHERE state = 'running';

-- A finding: one per (check, key, kind). status: open -> repair_requested
-- -> resolved (a later complete cycle no longer sees it) | ignored.
-- diff: for a mismatch, {"field": {"local": v, "remote": v}}.
CREATE TABLE switchyard.reconcile_findings (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    check_id        bigint NOT NULL REFERENCES switchyard.reconcile_checks (id) ON DELETE CASCADE,
    key             text NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('missing_remote', 'missing_local', 'mismatch')),
    status          text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'repair_requested', 'resolved', 'ignored')),
    ref             bigint,
    diff            jsonb NOT NULL DEFAULT '{}',
    first_cycle_id  bigint NOT NULL,
    last_cycle_id   bigint NOT NULL,
    repair_cycle_id bigint,
    repair_message  bigint,
    first_seen_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at    timestamptz NOT NULL DEFAULT now(),
    resolved_at     timestamptz,
    UNIQUE (check_id, key, kind)
);
CREATE INDEX reconcile_findings_open ON switchyard.reconcile_findings (check_id, id)
    WHERE status IN ('open', 'repair_requested');

-- A finding's history: opened, reopened, repair_requested, resolved,
-- ignored; actor is empty for the runner.
CREATE TABLE switchyard.reconcile_finding_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    finding_id bigint NOT NULL REFERENCES switchyard.reconcile_findings (id) ON DELETE CASCADE,
    cycle_id   bigint,
    event      text NOT NULL,
    actor      text NOT NULL DEFAULT '',
    reason     text NOT NULL DEFAULT '',
    at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reconcile_finding_events_finding ON switchyard.reconcile_finding_events (finding_id, id);

-- +goose Down
DROP TABLE switchyard.reconcile_finding_events;
DROP TABLE switchyard.reconcile_findings;
DROP TABLE switchyard.reconcile_cycles;
DROP TABLE switchyard.reconcile_checks;
