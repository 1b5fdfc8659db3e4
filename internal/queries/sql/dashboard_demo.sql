-- `console demo`'s traffic generator (cmd/console/demo_traffic.go).

-- name: DemoOrderInsert :one
-- DemoOrderInsert writes a demo order; its outbox event is enqueued in
-- the same transaction.
INSERT INTO switchyard.demo_orders (customer, amount_cents)
VALUES (@customer, @amount_cents)
RETURNING id, created_at;
