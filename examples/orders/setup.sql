-- The order service's own tables, beside Switchyard's (schema switchyard)
-- in the same database: that is what makes the outbox transactional.
CREATE SCHEMA IF NOT EXISTS orders;
CREATE TABLE IF NOT EXISTS orders.orders (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer    text NOT NULL,
    total_cents bigint NOT NULL,
    paid_cents  bigint NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Where order.placed goes: the warehouse's webhook. The secret stays in
-- Switchyard's environment (WAREHOUSE_SECRET, "whsec_..."); the row names it.
INSERT INTO switchyard.destinations (name, kind, address, secret_ref)
VALUES ('warehouse', 'webhook', :'warehouse_url', 'WAREHOUSE_SECRET')
ON CONFLICT (name) DO UPDATE SET address = EXCLUDED.address;

-- Where payment events go after the inbox recorded them: this service.
INSERT INTO switchyard.destinations (name, kind, address, secret_ref)
VALUES ('orders-payments', 'webhook', :'payments_url', 'ORDERS_PAYMENTS_SECRET')
ON CONFLICT (name) DO UPDATE SET address = EXCLUDED.address;

-- The payment provider posts to POST /inbox/payments, signed the Standard
-- Webhooks way with PAYMENTS_SECRET. The built-in forward handler records
-- each event once and enqueues it to orders-payments in the same
-- transaction, one order's events in order (entity_field).
INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, forward_to, entity_field)
VALUES ('payments', 'standard-webhooks', '{PAYMENTS_SECRET}', 'forward', 'orders-payments', 'order_id')
ON CONFLICT (name) DO NOTHING;

-- The same payments, applied without Go: the built-in sql handler calls
-- this function in the transaction that records the event, so its effect
-- happens once per event.
CREATE OR REPLACE FUNCTION orders.apply_payment(event jsonb, headers jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF event->>'type' <> 'payment.succeeded' THEN
        RETURN;
    END IF;
    UPDATE orders.orders SET paid_cents = paid_cents + (event->>'amount_cents')::bigint
    WHERE id = (event->>'order_id')::bigint;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'payment for unknown order %', event->>'order_id';
    END IF;
END
$$;

INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler, sql_function)
VALUES ('payments-sql', 'standard-webhooks', '{PAYMENTS_SECRET}', 'sql', 'orders.apply_payment')
ON CONFLICT (name) DO NOTHING;
