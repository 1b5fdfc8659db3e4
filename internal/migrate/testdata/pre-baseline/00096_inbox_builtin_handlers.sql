-- +goose Up

-- Inbox handlers that need no Go code (internal/inbox, builtin.go): a
-- source whose handler is 'forward' enqueues each new event to the outbox
-- destination forward_to, ordered per entity when entity_field names the
-- payload field that identifies the entity; one whose handler is 'sql'
-- calls sql_function(event jsonb, headers jsonb), a function the team owns,
-- in the transaction that records the event.
ALTER TABLE switchyard.inbox_sources
    ADD COLUMN forward_to   text NOT NULL DEFAULT '',
    ADD COLUMN entity_field text NOT NULL DEFAULT ''
        CHECK (entity_field ~ '^([A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*)?$'),
    ADD COLUMN sql_function text NOT NULL DEFAULT ''
        CHECK (sql_function ~ '^([a-z_][a-z0-9_]{0,62}\.[a-z_][a-z0-9_]{0,62})?$'),
    ADD CONSTRAINT inbox_sources_forward_check CHECK (handler <> 'forward' OR forward_to <> ''),
    ADD CONSTRAINT inbox_sources_sql_check CHECK (handler <> 'sql' OR sql_function <> '');

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
ALTER TABLE switchyard.inbox_sources
    DROP CONSTRAINT inbox_sources_forward_check, DROP CONSTRAINT inbox_sources_sql_check,
    DROP COLUMN forward_to, DROP COLUMN entity_field, DROP COLUMN sql_function;
