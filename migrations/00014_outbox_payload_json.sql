-- +goose Up

-- Outbox payloads are kept as json, not jsonb: the bytes a service
-- enqueued are the bytes delivered. jsonb stores a parsed form and prints
-- it back in its own way: keys sorted by length and deduplicated,
-- whitespace normalised, and 1.10 or 12345678901234567890.0 as numeric
-- prints them, which breaks a receiver that checks a signature of its own
-- over the body, keeps the body as a document, or parses numbers as the
-- sender wrote them. json only validates the text on the way in (cheaper
-- than converting it, as for the inbox in 00036). The headers follow: a
-- map that Enqueue encodes, read back the same way.
--
-- Nothing in Switchyard compares payloads or headers (=, DISTINCT, GROUP
-- BY and UNION do not work on json) or indexes them; the json operators
-- (->, ->>, #>>, json_typeof) work as on jsonb, so a filter on a payload
-- field such as payload->>'order_id' = '42' still works. A service that
-- inserts with SQL is unaffected: a jsonb value is cast to json on insert.
--
-- One thing jsonb refused stays refused: a \u0000 escape in a string.
-- json would store it, but every ->> on that row would then fail, and
-- with it any filter on a payload field over all rows. The CHECK looks
-- for the six characters first (cheap) and lets jsonb decide only when
-- they are there (a "\\u0000", an escaped backslash, is fine).
--
-- Up rewrites the outbox under an exclusive lock: on a large outbox, run
-- it when enqueuers and dispatchers may pause.
ALTER TABLE switchyard.outbox DROP CONSTRAINT outbox_headers_check;
ALTER TABLE switchyard.outbox ALTER COLUMN headers DROP DEFAULT;
ALTER TABLE switchyard.outbox
    ALTER COLUMN headers TYPE json USING headers::json,
    ALTER COLUMN payload TYPE json USING payload::json;
ALTER TABLE switchyard.outbox
    ALTER COLUMN headers SET DEFAULT '{}',
    ADD CONSTRAINT outbox_headers_check CHECK (json_typeof(headers) = 'object'),
    ADD CONSTRAINT outbox_payload_check CHECK (strpos(payload::text, '\u0000') = 0 OR payload::jsonb IS NOT NULL);

-- +goose Down
ALTER TABLE switchyard.outbox DROP CONSTRAINT outbox_payload_check;
ALTER TABLE switchyard.outbox DROP CONSTRAINT outbox_headers_check;
ALTER TABLE switchyard.outbox ALTER COLUMN headers DROP DEFAULT;
ALTER TABLE switchyard.outbox
    ALTER COLUMN headers TYPE jsonb USING headers::jsonb,
    ALTER COLUMN payload TYPE jsonb USING payload::jsonb;
ALTER TABLE switchyard.outbox
    ALTER COLUMN headers SET DEFAULT '{}',
    ADD CONSTRAINT outbox_headers_check CHECK (jsonb_typeof(headers) = 'object');
