-- The demo handler "customer-upsert" (internal/democustomer).

-- name: DemoCustomerInsertIfAbsent :one
-- DemoCustomerInsertIfAbsent creates the customer unless one with its
-- external id exists; no row means it existed. Run it only under the
-- customer's advisory lock: the check and the insert are not atomic.
INSERT INTO switchyard.demo_customers (external_id, name, email)
SELECT @external_id, @name, @email
WHERE NOT EXISTS (SELECT 1 FROM switchyard.demo_customers WHERE external_id = @external_id)
RETURNING id;

-- name: DemoCustomerUpdate :exec
UPDATE switchyard.demo_customers SET name = @name, email = @email, updated_at = now()
WHERE external_id = @external_id;
