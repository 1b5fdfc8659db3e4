-- +goose Up
-- Every Switchyard table lives in this schema, beside the application's own
-- tables in the same database: that is what lets a service enqueue an event in
-- the same transaction as its business change. The schema is a public contract.
-- The migrator creates the schema before goose runs (goose keeps its version
-- table in it), so no migration drops it; this statement is for sqlc.
CREATE SCHEMA IF NOT EXISTS switchyard;

COMMENT ON SCHEMA switchyard IS 'Switchyard: transactional outbox, inbox, reconciliation and the console''s state. A public contract: see README.md.';

-- +goose Down
COMMENT ON SCHEMA switchyard IS NULL;
