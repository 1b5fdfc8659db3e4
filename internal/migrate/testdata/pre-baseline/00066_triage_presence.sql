-- +goose Up

-- Presence: who looks at the triage board and at each item right now, on
-- every console instance. One row per open WebSocket, refreshed by its
-- connection's heartbeat; a row whose tab or instance died expires on the
-- database clock and the next sweep of any instance deletes it and
-- announces the change (internal/triage/presence.go). Unlogged: presence
-- is ephemeral, and a crash of the server ends every socket anyway.
--   view  "board" or "item:<id>"
CREATE UNLOGGED TABLE switchyard.triage_presence (
    conn_id      uuid PRIMARY KEY,
    instance     text NOT NULL,
    account_id   bigint NOT NULL,
    account_name text NOT NULL,
    view         text NOT NULL CHECK (view ~ '^(board|item:[0-9]{1,19})$'),
    expires_at   timestamptz NOT NULL
);
CREATE INDEX triage_presence_view ON switchyard.triage_presence (view);
CREATE INDEX triage_presence_expires ON switchyard.triage_presence (expires_at);

-- +goose Down
DROP TABLE switchyard.triage_presence;
