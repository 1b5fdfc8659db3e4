-- +goose Up

-- Where inbound events come from. A source names how its requests are
-- signed, where the running process finds the secrets (secret_refs: names
-- of environment variables, like destinations.secret_ref; several during a
-- rotation), how far a signature's timestamp may lie from our clock, what to
-- do with an event that skips an entity version, which handler applies its
-- events, and how many failed attempts park an event.
-- See docs/inbox.md for the contract with senders.
--
-- handler names a registered Go handler, or one of the built-in handlers
-- that need no Go code (internal/inbox, builtin.go): a source whose handler
-- is 'forward' enqueues each new event to the outbox destination
-- forward_to, ordered per entity when entity_field names the payload field
-- that identifies the entity; one whose handler is 'sql' calls
-- sql_function(event jsonb, headers jsonb), a function the team owns, in
-- the transaction that records the event (switchyard.inbox_call below).
CREATE TABLE switchyard.inbox_sources (
    name              text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    scheme            text NOT NULL CHECK (scheme IN ('standard-webhooks', 'stripe')),
    secret_refs       text[] NOT NULL CHECK (cardinality(secret_refs) > 0),
    tolerance_seconds integer NOT NULL DEFAULT 300 CHECK (tolerance_seconds > 0),
    out_of_order      text NOT NULL DEFAULT 'apply' CHECK (out_of_order IN ('apply', 'hold')),
    handler           text NOT NULL,
    max_attempts      integer NOT NULL DEFAULT 5 CHECK (max_attempts > 0),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    forward_to        text NOT NULL DEFAULT '',
    entity_field      text NOT NULL DEFAULT ''
        CHECK (entity_field ~ '^([A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*)?$'),
    sql_function      text NOT NULL DEFAULT ''
        CHECK (sql_function ~ '^([a-z_][a-z0-9_]{0,62}\.[a-z_][a-z0-9_]{0,62})?$'),
    CONSTRAINT inbox_sources_forward_check CHECK (handler <> 'forward' OR forward_to <> ''),
    CONSTRAINT inbox_sources_sql_check CHECK (handler <> 'sql' OR sql_function <> '')
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
--
-- The payload is json, not jsonb: the text as the sender sent it (key
-- order, duplicate keys and all), which is what an operator wants to see
-- when a sender is in question. It also accepts what jsonb refuses although
-- it is valid JSON (a \u0000 escape): with jsonb such an event failed to be
-- stored on every redelivery. And the receiver's hot path stores it for
-- less: json only validates the text, jsonb converts it (about 3 % less CPU
-- per event, BENCHMARKS.md, Inbox). The headers kept (a map the receiver
-- encodes) follow, for the same cost reason. Nothing queries inside either
-- column, compares them or indexes them.
CREATE TABLE switchyard.inbox_events (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source            text NOT NULL,
    event_id          text NOT NULL CHECK (event_id <> ''),
    received_at       timestamptz NOT NULL DEFAULT now(),
    headers           json NOT NULL DEFAULT '{}' CHECK (json_typeof(headers) = 'object'),
    payload           json NOT NULL,
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

-- inbox_call calls fn (schema.function, lower-case identifiers, validated
-- again here) with the event and its headers. The name is quoted with %I,
-- so it can only ever name a function; the function runs with the
-- caller's rights (SECURITY INVOKER) in the caller's transaction.
-- +goose StatementBegin
CREATE FUNCTION switchyard.inbox_call(fn text, event jsonb, headers jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF fn IS NULL OR fn !~ '^[a-z_][a-z0-9_]{0,62}\.[a-z_][a-z0-9_]{0,62}$' THEN
        RAISE EXCEPTION 'inbox_call: invalid function name %', fn USING ERRCODE = '22023';
    END IF;
    EXECUTE format('SELECT %I.%I($1, $2)', split_part(fn, '.', 1), split_part(fn, '.', 2))
        USING event, headers;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION switchyard.inbox_call(text, jsonb, jsonb);
DROP TABLE switchyard.inbox_duplicates;
DROP TABLE switchyard.inbox_entity_versions;
DROP TABLE switchyard.inbox_events;
DROP TABLE switchyard.inbox_sources;
