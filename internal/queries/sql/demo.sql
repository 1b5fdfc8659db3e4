-- The demo handler "customer-upsert" (internal/democustomer).

-- name: DemoCustomerFind :one
SELECT id FROM switchyard.demo_customers WHERE external_id = @external_id ORDER BY id LIMIT 1;

-- name: DemoCustomerInsert :one
INSERT INTO switchyard.demo_customers (external_id, name, email) VALUES (@external_id, @name, @email)
RETURNING id;

-- name: DemoCustomerUpdate :exec
UPDATE switchyard.demo_customers SET name = @name, email = @email, updated_at = now() WHERE id = @id;
