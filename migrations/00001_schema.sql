-- +goose Up
-- Every Switchyard table lives in this schema, beside the application's own
-- tables in the same database: that is what lets a service enqueue an event in
-- the same transaction as its business change. The schema is a public contract.
-- The migrator creates the schema before goose runs (goose keeps its version
-- table in it), so no migration drops it; this statement is for sqlc.
CREATE SCHEMA IF NOT EXISTS switchyard;

COMMENT ON SCHEMA switchyard IS 'Switchyard: transactional outbox, inbox, reconciliation and the console''s state. A public contract: see README.md.';

-- switchyard.advisory_xact_lock takes a transaction-level advisory lock,
-- waiting at most timeout_ms. The SET clause confines the lock_timeout to
-- the call: the caller's own setting is back in force afterwards. A
-- timeout raises lock_not_available (SQLSTATE 55P03). Check-then-insert
-- races on a natural key are serialised with it (internal/advisory).
-- +goose StatementBegin
CREATE FUNCTION switchyard.advisory_xact_lock(key bigint, timeout_ms integer) RETURNS void
LANGUAGE plpgsql SET lock_timeout = 0 AS $$
BEGIN
    PERFORM set_config('lock_timeout', timeout_ms::text || 'ms', true);
    PERFORM pg_advisory_xact_lock(key);
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION switchyard.advisory_xact_lock(bigint, integer);
COMMENT ON SCHEMA switchyard IS NULL;
