-- +goose Up

-- Inbound events keep their payload and headers as json, not jsonb: the
-- text as the sender sent it (key order, duplicate keys and all), which is
-- what an operator wants to see when a sender is in question, and what
-- the receiver's hot path can store for less: json only validates the
-- text, jsonb converts it. Nothing queries inside either column; handlers
-- get the bytes. Measured with `console bench inbox`: about 3 % less CPU
-- per event (BENCHMARKS.md, Inbox).
ALTER TABLE switchyard.inbox_events DROP CONSTRAINT inbox_events_headers_check;
ALTER TABLE switchyard.inbox_events ALTER COLUMN headers DROP DEFAULT;
ALTER TABLE switchyard.inbox_events
    ALTER COLUMN headers TYPE json USING headers::json,
    ALTER COLUMN payload TYPE json USING payload::json;
ALTER TABLE switchyard.inbox_events
    ALTER COLUMN headers SET DEFAULT '{}',
    ADD CONSTRAINT inbox_events_headers_check CHECK (json_typeof(headers) = 'object');

-- +goose Down
ALTER TABLE switchyard.inbox_events DROP CONSTRAINT inbox_events_headers_check;
ALTER TABLE switchyard.inbox_events ALTER COLUMN headers DROP DEFAULT;
ALTER TABLE switchyard.inbox_events
    ALTER COLUMN headers TYPE jsonb USING headers::jsonb,
    ALTER COLUMN payload TYPE jsonb USING payload::jsonb;
ALTER TABLE switchyard.inbox_events
    ALTER COLUMN headers SET DEFAULT '{}',
    ADD CONSTRAINT inbox_events_headers_check CHECK (jsonb_typeof(headers) = 'object');
