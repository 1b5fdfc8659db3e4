-- The demo handler "customer-upsert" (internal/democustomer).

-- name: DemoCustomerUpsert :one
-- DemoCustomerUpsert creates the customer unless one with its external id
-- exists, and updates it otherwise, under the customer's advisory lock
-- (lock_key from advisory.Key; waits at most timeout_ms, then fails with
-- lock_not_available). It returns whether it created the customer. See
-- migrations/00025_demo_customer_upsert.sql.
SELECT switchyard.demo_customer_upsert(@lock_key::bigint, @timeout_ms::integer, @external_id::text, @name::text, @email::text)::boolean AS created;

