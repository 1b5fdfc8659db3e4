-- +goose Up

-- Refused requests of a session (a role too low), for the audit trail:
-- the first refusal is recorded, then at most one per interval, so that a
-- signed-in account cannot flood the hash-chained trail; the refusals in
-- between are counted here and reported with the next recorded one.
ALTER TABLE switchyard.sessions
    ADD COLUMN denied_audited_at timestamptz,
    ADD COLUMN denied_unaudited  integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE switchyard.sessions
    DROP COLUMN denied_unaudited,
    DROP COLUMN denied_audited_at;
