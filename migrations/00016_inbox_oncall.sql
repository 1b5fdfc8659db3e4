-- +goose Up

-- What the inbox's pages need for on-call (issue 14, item 6).

-- Every attempt of an inbound event that was recorded: each failed attempt
-- (written by the InboxEventFail statement that records the failure) and
-- each operator retry (action.RetryInboxEvent: actor and request id set,
-- the request id making the retry idempotent). An event's successful
-- first-try delivery writes no row (the receive path stays as it was):
-- its attempt is the event's processed_at. Deleted with its event.
CREATE TABLE switchyard.inbox_event_attempts (
    inbox_event_id bigint NOT NULL REFERENCES switchyard.inbox_events (id) ON DELETE CASCADE,
    attempt integer NOT NULL CHECK (attempt > 0),
    at timestamptz NOT NULL DEFAULT now(),
    outcome text NOT NULL CHECK (outcome IN ('processed', 'failed', 'parked', 'stale', 'held')),
    error text,
    actor text NOT NULL DEFAULT '',
    request_id uuid UNIQUE,
    PRIMARY KEY (inbox_event_id, attempt)
);

-- Each delivery of an event that was already recorded (a duplicate:
-- answered 2xx, no second effect), written by the claim's duplicate path
-- beside the per-source counter (inbox_duplicates). Keyed by the event's
-- natural key, since the claim's snapshot may not see the row of an event
-- that a concurrent delivery just recorded; deleted with the event by
-- InboxEventPrune.
CREATE TABLE switchyard.inbox_event_duplicates (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source text NOT NULL,
    event_id text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbox_event_duplicates_event ON switchyard.inbox_event_duplicates (source, event_id, id);

-- The outbox messages an event's handler enqueued (the built-in forward
-- handler records the one it forwards), for the event's page.
CREATE TABLE switchyard.inbox_event_messages (
    inbox_event_id bigint NOT NULL REFERENCES switchyard.inbox_events (id) ON DELETE CASCADE,
    outbox_id bigint NOT NULL,
    PRIMARY KEY (inbox_event_id, outbox_id)
);

-- +goose Down
DROP TABLE switchyard.inbox_event_messages;
DROP TABLE switchyard.inbox_event_duplicates;
DROP TABLE switchyard.inbox_event_attempts;
