-- +goose Up

-- The demo's objects leave the core schema: `console demo` keeps them in a
-- schema of its own, switchyard_demo, which it creates itself at start
-- (internal/demo/demodb/schema.sql), so a production database carries no
-- demo tables. What a demo wrote here before is dropped with them.
DROP FUNCTION IF EXISTS switchyard.demo_customer_upsert(bigint, integer, text, text, text);
DROP TABLE IF EXISTS switchyard.demo_customers;
DROP TABLE IF EXISTS switchyard.demo_orders;

-- +goose Down

-- As migrations 00005, 00008 and 00025 created them (empty).
CREATE TABLE switchyard.demo_orders (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer    text NOT NULL,
    amount_cents bigint NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE switchyard.demo_customers (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    external_id text NOT NULL,
    name        text NOT NULL DEFAULT '',
    email       text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX demo_customers_external_id ON switchyard.demo_customers (external_id);
-- +goose StatementBegin
CREATE FUNCTION switchyard.demo_customer_upsert(
    lock_key bigint, timeout_ms integer, p_external_id text, p_name text, p_email text
) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(lock_key) THEN
        PERFORM switchyard.advisory_xact_lock(lock_key, timeout_ms);
    END IF;
    INSERT INTO switchyard.demo_customers (external_id, name, email)
    SELECT p_external_id, p_name, p_email
    WHERE NOT EXISTS (SELECT 1 FROM switchyard.demo_customers c WHERE c.external_id = p_external_id);
    IF FOUND THEN
        RETURN true;
    END IF;
    UPDATE switchyard.demo_customers c SET name = p_name, email = p_email, updated_at = now()
    WHERE c.external_id = p_external_id;
    RETURN false;
END;
$$;
-- +goose StatementEnd
