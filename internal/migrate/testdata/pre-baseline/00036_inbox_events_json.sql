-- +goose Up

-- Inbound events keep their payload as json, not jsonb: the text as the
-- sender sent it (key order, duplicate keys and all), which is what an
-- operator wants to see when a sender is in question. It also accepts what
-- jsonb refuses although it is valid JSON (a \u0000 escape): with jsonb such
-- an event failed to be stored on every redelivery. And the receiver's hot
-- path stores it for less: json only validates the text, jsonb converts it
-- (about 3 % less CPU per event, BENCHMARKS.md, Inbox). The headers kept
-- (a map the receiver encodes) follow, for the same cost reason. Nothing
-- queries inside either column, compares them or indexes them.
--
-- Up rewrites the table under an exclusive lock: on a large inbox, run it
-- when the receiver may pause. Down fails if a payload holds \u0000, which
-- jsonb cannot store: remove such events first.
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
