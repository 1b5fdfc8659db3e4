-- The demo's tables and functions, in a schema of their own that only
-- `console demo` (and the inbox bench) creates: a production database
-- carries none of them. Install (schema.go) runs this file in one
-- transaction; every statement is idempotent, so it runs at every start.
-- It is also sqlc's schema for the queries in sql/.

CREATE SCHEMA IF NOT EXISTS switchyard_demo;

-- The demo's business table: an order and its outbox event are written in
-- one transaction, as a real service would.
CREATE TABLE IF NOT EXISTS switchyard_demo.orders (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer     text NOT NULL,
    amount_cents bigint NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- The customer-upsert inbox handler's table: customers created from
-- inbound events. external_id is deliberately not unique: the demo shows
-- the check-then-insert race being serialised by an advisory lock on the
-- natural key, as in schemas where a unique constraint cannot express the
-- rule.
CREATE TABLE IF NOT EXISTS switchyard_demo.customers (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    external_id text NOT NULL,
    name        text NOT NULL DEFAULT '',
    email       text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS customers_external_id ON switchyard_demo.customers (external_id);

-- customer_upsert is the handler's "create the customer if absent, else
-- update it" in one round trip instead of two or three: the handler runs
-- for every inbound event, and on a 2-core machine each statement sent is
-- a measurable share of the inbox's throughput.
--
-- The race it closes is the one internal/advisory documents: two
-- transactions both find no customer and both insert. It takes the
-- advisory lock on the customer's key, computed by advisory.Key in Go,
-- first without waiting, then through switchyard.advisory_xact_lock, which
-- waits at most timeout_ms and raises lock_not_available (55P03) after
-- that. The check-then-insert comes after the lock, as a statement of its
-- own: in READ COMMITTED each statement of a VOLATILE function takes a new
-- snapshot, so it sees the customer that a previous holder of the lock
-- committed. It returns whether it created the customer.
CREATE OR REPLACE FUNCTION switchyard_demo.customer_upsert(
    lock_key bigint, timeout_ms integer, p_external_id text, p_name text, p_email text
) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(lock_key) THEN
        PERFORM switchyard.advisory_xact_lock(lock_key, timeout_ms);
    END IF;
    INSERT INTO switchyard_demo.customers (external_id, name, email)
    SELECT p_external_id, p_name, p_email
    WHERE NOT EXISTS (SELECT 1 FROM switchyard_demo.customers c WHERE c.external_id = p_external_id);
    IF FOUND THEN
        RETURN true;
    END IF;
    UPDATE switchyard_demo.customers c SET name = p_name, email = p_email, updated_at = now()
    WHERE c.external_id = p_external_id;
    RETURN false;
END;
$$;
