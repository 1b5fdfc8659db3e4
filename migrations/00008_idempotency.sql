-- +goose Up

-- Idempotency keys of the console's own JSON API, per principal (who sent
-- the request). The first request with a key inserts its row in_flight;
-- when it completes, the response is stored verbatim and replayed to every
-- later request with the same key and the same request fingerprint.
CREATE TABLE switchyard.idempotency_keys (
    principal           text NOT NULL,
    key                 text NOT NULL CHECK (key <> '' AND length(key) <= 255),
    request_fingerprint text NOT NULL,
    status              text NOT NULL CHECK (status IN ('in_flight', 'done')),
    response_status     integer,
    response_headers    jsonb,
    response_body       bytea,
    created_at          timestamptz NOT NULL DEFAULT now(),
    expires_at          timestamptz NOT NULL,
    PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_keys_expires ON switchyard.idempotency_keys (expires_at);

-- +goose Down
DROP TABLE switchyard.idempotency_keys;
