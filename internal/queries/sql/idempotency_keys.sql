-- switchyard.idempotency_keys: idempotency keys of the console's JSON API
-- (internal/idempotency). Pruned by internal/retention.

-- name: IdempotencyKeyClaim :one
-- IdempotencyKeyClaim records a new request under its key, in flight. It
-- takes over a key whose row has expired. It returns no row when the key
-- is taken (by a request in flight or a stored response).
INSERT INTO switchyard.idempotency_keys AS k (principal, key, request_fingerprint, status, expires_at)
VALUES (@principal, @key, @request_fingerprint, 'in_flight', now() + make_interval(secs => @ttl_seconds::float8))
ON CONFLICT (principal, key) DO UPDATE SET
    request_fingerprint = EXCLUDED.request_fingerprint, status = 'in_flight',
    response_status = NULL, response_headers = NULL, response_body = NULL,
    created_at = now(), expires_at = EXCLUDED.expires_at
    WHERE k.expires_at <= now()
RETURNING created_at;

-- name: IdempotencyKeyGet :one
SELECT * FROM switchyard.idempotency_keys WHERE principal = @principal AND key = @key;

-- name: IdempotencyKeyComplete :exec
-- IdempotencyKeyComplete stores the response of the request that claimed
-- the key.
UPDATE switchyard.idempotency_keys
SET status = 'done', response_status = @response_status, response_headers = @response_headers, response_body = @response_body
WHERE principal = @principal AND key = @key AND created_at = @created_at AND status = 'in_flight';

-- name: IdempotencyKeyRelease :exec
-- IdempotencyKeyRelease forgets a request that stored nothing (a
-- validation failure or an error), so that the key may be used again.
DELETE FROM switchyard.idempotency_keys
WHERE principal = @principal AND key = @key AND created_at = @created_at AND status = 'in_flight';

-- name: IdempotencyKeyPrune :execrows
DELETE FROM switchyard.idempotency_keys WHERE expires_at <= now();

-- name: IdempotencyKeyPruneBatch :execrows
-- IdempotencyKeyPruneBatch deletes keys that expired: a retry that late is
-- a new request anyway (IdempotencyKeyClaim takes an expired key over).
DELETE FROM switchyard.idempotency_keys
WHERE (principal, key) IN (
    SELECT k.principal, k.key FROM switchyard.idempotency_keys k
    WHERE k.expires_at <= now()
    ORDER BY k.expires_at
    LIMIT @batch_size
)
AND expires_at <= now();
