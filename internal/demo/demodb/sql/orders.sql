-- `console demo`'s traffic generator (internal/demo/traffic.go).

-- name: OrderInsert :one
-- OrderInsert writes a demo order; its outbox event is enqueued in the
-- same transaction.
INSERT INTO switchyard_demo.orders (customer, amount_cents)
VALUES (@customer, @amount_cents)
RETURNING id, created_at;

-- name: OrdersAfter :many
-- OrdersAfter is the next orders after id, for the demo's external
-- provider, which mirrors them (internal/demo/mirror.go).
SELECT id, customer, amount_cents FROM switchyard_demo.orders
WHERE id > @after ORDER BY id LIMIT @max_rows;
