-- `console demo`'s traffic generator (internal/demo/traffic.go).

-- name: OrderInsert :one
-- OrderInsert writes a demo order; its outbox event is enqueued in the
-- same transaction.
INSERT INTO switchyard_demo.orders (customer, amount_cents)
VALUES (@customer, @amount_cents)
RETURNING id, created_at;
