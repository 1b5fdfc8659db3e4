-- +goose Up

-- Delivery policy and outbound secret rotation per destination.
--
-- permanent_statuses: the HTTP statuses that send a webhook message
-- straight to dead. NULL (the default) is the default policy: every 4xx
-- except 401, 403, 404, 408 and 429 (a receiver that rotates its secret or
-- deploys a new route answers 401/403/404 for a while: retried with backoff,
-- not dead-lettered at once). A list replaces the default: exactly those
-- statuses are permanent, '{}' means none is.
--
-- secret_refs: further environment variables holding signing secrets,
-- after secret_ref. Every delivery carries one signature per secret (a
-- space-separated webhook-signature), so a receiver can rotate its key
-- without a gap.
ALTER TABLE switchyard.destinations
    ADD COLUMN permanent_statuses integer[]
        CHECK (400 <= ALL (permanent_statuses) AND 599 >= ALL (permanent_statuses)
               AND array_position(permanent_statuses, NULL) IS NULL),
    ADD COLUMN secret_refs text[] NOT NULL DEFAULT '{}'
        CHECK (array_position(secret_refs, '') IS NULL AND array_position(secret_refs, NULL) IS NULL);

-- +goose Down
ALTER TABLE switchyard.destinations DROP COLUMN permanent_statuses, DROP COLUMN secret_refs;
