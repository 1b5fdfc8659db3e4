-- The demo inbox handler "customer-upsert" (internal/demo/customer).

-- name: CustomerUpsert :one
-- CustomerUpsert creates the customer unless one with its external id
-- exists, and updates it otherwise, under the customer's advisory lock
-- (lock_key from advisory.Key; waits at most timeout_ms, then fails with
-- lock_not_available). It returns whether it created the customer. See
-- schema.sql.
SELECT switchyard_demo.customer_upsert(@lock_key::bigint, @timeout_ms::integer, @external_id::text, @name::text, @email::text)::boolean AS created;

-- name: CustomerEventOnce :one
-- CustomerEventOnce receives a customer event without an entity version
-- in one statement, run on its own (its implicit transaction is the
-- event's; inbox.Registration.Once): the inbox's claim
-- (switchyard.inbox_claim) and, for a new event, CustomerUpsert, where the
-- inbox's general path takes three round trips (the claim with its
-- BEGIN, the upsert, the COMMIT). event_row is the recorded event's id, or
-- 0 for a duplicate (counted by the claim; no customer written). A lock
-- not granted in time fails the statement, and with it the claim.
SELECT c.event_row::bigint AS event_row,
    coalesce(CASE WHEN c.event_row > 0
        THEN switchyard_demo.customer_upsert(@lock_key::bigint, @timeout_ms::integer, @external_id::text, @name::text, @email::text)
    END, false)::boolean AS created
FROM switchyard.inbox_claim(@source::text, @event_id::text, @headers::json, @payload::json, @slot::smallint) AS c (event_row);
