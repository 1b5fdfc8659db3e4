-- +goose Up

-- Where inbound events come from. A source names how its requests are
-- signed, where the running process finds the secrets (secret_refs: names
-- of environment variables, like destinations.secret_ref; several during a
-- rotation), how far a signature's timestamp may lie from our clock, what to
-- do with an event that skips an entity version, which registered Go
-- handler applies its events, and how many failed attempts park an event.
-- See docs/inbox.md for the contract with senders.
CREATE TABLE switchyard.inbox_sources (
    name              text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    scheme            text NOT NULL CHECK (scheme IN ('standard-webhooks', 'stripe')),
    secret_refs       text[] NOT NULL CHECK (cardinality(secret_refs) > 0),
    tolerance_seconds integer NOT NULL DEFAULT 300 CHECK (tolerance_seconds > 0),
    out_of_order      text NOT NULL DEFAULT 'apply' CHECK (out_of_order IN ('apply', 'hold')),
    handler           text NOT NULL,
    max_attempts      integer NOT NULL DEFAULT 5 CHECK (max_attempts > 0),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

-- One row per (source, event id) ever received. The row of an applied
-- event commits in the same transaction as the handler's effect: that is
-- what makes a redelivery a no-op (invariant 5). Statuses:
--   processed  the handler's effect committed with this row
--   failed     the handler failed (attempts, last_error); a redelivery retries
--   parked     failed max_attempts times: the inbox's dead letter
--   stale      older than the entity's applied version: recorded, not applied
--   held       newer than the applied version + 1 under the 'hold' policy:
--              applied when its predecessor is
-- source is not a foreign key: the Go API (inbox.Receive) takes events
-- from sources that exist only in the embedding program.
CREATE TABLE switchyard.inbox_events (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source            text NOT NULL,
    event_id          text NOT NULL CHECK (event_id <> ''),
    received_at       timestamptz NOT NULL DEFAULT now(),
    headers           jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(headers) = 'object'),
    payload           jsonb NOT NULL,
    entity_key        text NOT NULL DEFAULT '',
    entity_version    bigint,
    status            text NOT NULL CHECK (status IN ('processed', 'failed', 'parked', 'stale', 'held')),
    attempts          integer NOT NULL DEFAULT 0,
    last_error        text,
    error_fingerprint text,
    processed_at      timestamptz,
    CONSTRAINT inbox_events_source_event_key UNIQUE (source, event_id)
);

-- The console's failure view, grouped by fingerprint.
CREATE INDEX inbox_events_unsettled ON switchyard.inbox_events (source, error_fingerprint)
    WHERE status IN ('failed', 'parked');
-- Held events are found by their predecessor's version.
CREATE INDEX inbox_events_held ON switchyard.inbox_events (source, entity_key, entity_version)
    WHERE status = 'held';

-- The version of each entity last applied, per source. Its row is locked
-- while an event of the entity is applied, so two events of one entity
-- are applied one after the other.
CREATE TABLE switchyard.inbox_entity_versions (
    source     text NOT NULL,
    entity_key text NOT NULL,
    version    bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, entity_key)
);

-- Duplicate deliveries per source. slot spreads the counter over a few
-- rows so that concurrent duplicates do not queue on one row lock; the
-- count of a source is the sum of its slots.
CREATE TABLE switchyard.inbox_duplicates (
    source     text NOT NULL,
    slot       smallint NOT NULL,
    count      bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, slot)
);

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

-- switchyard.advisory_xact_lock takes a transaction-level advisory lock,
-- waiting at most timeout_ms. The SET clause confines the lock_timeout to
-- the call: the caller's own setting is back in force afterwards. A
-- timeout raises lock_not_available (SQLSTATE 55P03).
-- +goose StatementBegin
CREATE FUNCTION switchyard.advisory_xact_lock(key bigint, timeout_ms integer) RETURNS void
LANGUAGE plpgsql SET lock_timeout = 0 AS $$
BEGIN
    PERFORM set_config('lock_timeout', timeout_ms::text || 'ms', true);
    PERFORM pg_advisory_xact_lock(key);
END;
$$;
-- +goose StatementEnd

-- The demo handler's table ("customer-upsert"): customers created from
-- inbound events. external_id is deliberately not unique: the demo shows
-- the check-then-insert race being serialised by an advisory lock on the
-- natural key, as in schemas where a unique constraint cannot express the
-- rule.
CREATE TABLE switchyard.demo_customers (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    external_id text NOT NULL,
    name        text NOT NULL DEFAULT '',
    email       text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX demo_customers_external_id ON switchyard.demo_customers (external_id);

-- +goose Down
DROP TABLE switchyard.demo_customers;
DROP FUNCTION switchyard.advisory_xact_lock(bigint, integer);
DROP TABLE switchyard.idempotency_keys;
DROP TABLE switchyard.inbox_duplicates;
DROP TABLE switchyard.inbox_entity_versions;
DROP TABLE switchyard.inbox_events;
DROP TABLE switchyard.inbox_sources;
