-- Place an order from SQL, as a service in any language would: the order
-- and its order.placed event commit in one transaction, or neither does.
--
--   psql "$DATABASE_URL" -v customer=ada -v total_cents=1999 -f place_order.sql
\set ON_ERROR_STOP on
BEGIN;
WITH placed AS (
    INSERT INTO orders.orders (customer, total_cents)
    VALUES (:'customer', :'total_cents')
    RETURNING id, customer, total_cents
)
INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload)
SELECT 'order.placed', 'warehouse', 'order', p.id::text,
    json_build_object('order_id', p.id, 'customer', p.customer, 'total_cents', p.total_cents)
FROM placed p
RETURNING aggregate_id AS order_id, payload;
COMMIT;
