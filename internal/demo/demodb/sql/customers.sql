-- The demo inbox handler "customer-upsert" (internal/demo/customer).

-- name: CustomerUpsert :one
-- CustomerUpsert creates the customer unless one with its external id
-- exists, and updates it otherwise, under the customer's advisory lock
-- (lock_key from advisory.Key; waits at most timeout_ms, then fails with
-- lock_not_available). It returns whether it created the customer. See
-- schema.sql.
SELECT switchyard_demo.customer_upsert(@lock_key::bigint, @timeout_ms::integer, @external_id::text, @name::text, @email::text)::boolean AS created;
