-- +goose Up

-- Collaborative triage (internal/triage). A triage item tracks one failure
-- that wants a person: a dead-letter group, a group of parked inbox events
-- (by source and fingerprint), a blocked aggregate, or a group of
-- reconciliation findings. Items are created by triggers on the rows they
-- track, in the transaction that creates those rows, so no job polls for
-- new failures and the dispatcher's and inbox's code is untouched: only the
-- failure path pays (a WHEN clause filters everything else).
--
-- Storage is an append-only event log (triage_events) with a read model
-- (triage_items) that every writer updates in the same transaction as the
-- event row it appends. The item's version is the number of its events:
-- clients apply only states newer than the version they hold.

-- ref names what the item tracks, as a JSON object (jsonb: its text form is
-- canonical, so (kind, ref) is a natural key):
--   dead_letter_group    {"fingerprint"}
--   inbox_failure_group  {"source", "fingerprint"}
--   blocked_aggregate    {"destination", "aggregate_type", "aggregate_id"}
--   reconcile_findings   whatever the reconciler names its group by
CREATE TABLE switchyard.triage_items (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind              text NOT NULL CHECK (kind IN ('dead_letter_group', 'inbox_failure_group', 'blocked_aggregate', 'reconcile_findings')),
    ref               jsonb NOT NULL CHECK (jsonb_typeof(ref) = 'object'),
    title             text NOT NULL DEFAULT '' CHECK (length(title) <= 512),
    status            text NOT NULL DEFAULT 'open'
        CHECK (status IN ('open', 'acknowledged', 'investigating', 'resolved', 'ignored')),
    -- ignored_until: an ignored item stays ignored through recurrences
    -- until then; NULL ignores it until the failure happens again.
    ignored_until     timestamptz CHECK (ignored_until IS NULL OR status = 'ignored'),
    assignee_id       bigint REFERENCES switchyard.users (id) ON DELETE SET NULL,
    assignee_name     text,
    -- The claim: who works on it right now, a lease on the database clock.
    -- claim_holder_id is the account id (0: the demo admin, no account).
    claim_holder_id   bigint,
    claim_holder_name text,
    claim_expires_at  timestamptz,
    version           bigint NOT NULL DEFAULT 1 CHECK (version > 0),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT triage_items_tracked UNIQUE (kind, ref),
    CONSTRAINT triage_items_claim CHECK ((claim_holder_id IS NULL) = (claim_expires_at IS NULL))
);
-- The board lists items by status, most recently changed first (keyset).
CREATE INDEX triage_items_board ON switchyard.triage_items (status, updated_at DESC, id DESC);
CREATE INDEX triage_items_assignee ON switchyard.triage_items (assignee_id) WHERE assignee_id IS NOT NULL;

-- The event log: one row per change of an item, in order of its version.
-- actor is the account name as it was then, or "system" for what the
-- triggers do (created, reopened).
CREATE TABLE switchyard.triage_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    item_id     bigint NOT NULL REFERENCES switchyard.triage_items (id),
    version     bigint NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    actor       text NOT NULL,
    actor_id    bigint,
    op          text NOT NULL CHECK (op ~ '^[a-z][a-z0-9_.]{0,63}$'),
    mutation_id uuid,
    detail      jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(detail) = 'object'),
    CONSTRAINT triage_events_version UNIQUE (item_id, version)
);

-- Notes: plain text of at most 8 KiB. The author may edit a note within
-- ten minutes of writing it; every version is kept in triage_note_versions
-- (append-only), the current one is also on the note.
CREATE TABLE switchyard.triage_notes (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    item_id     bigint NOT NULL REFERENCES switchyard.triage_items (id),
    author_id   bigint NOT NULL,
    author_name text NOT NULL,
    body        text NOT NULL CHECK (body <> '' AND octet_length(body) <= 8192),
    edits       integer NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    edited_at   timestamptz
);
CREATE INDEX triage_notes_item ON switchyard.triage_notes (item_id, id);

CREATE TABLE switchyard.triage_note_versions (
    note_id    bigint NOT NULL REFERENCES switchyard.triage_notes (id),
    version    integer NOT NULL,
    body       text NOT NULL,
    at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (note_id, version)
);

-- Mutation dedupe: the answer to each (account, mutation id), stored in
-- the mutation's transaction. The same mutation sent again (a reconnect,
-- the HTTP fallback) gets this answer and changes nothing; a concurrent
-- duplicate waits on the primary key until the first commits.
-- account_id 0 is the demo admin.
CREATE TABLE switchyard.triage_mutations (
    account_id   bigint NOT NULL,
    mutation_id  uuid NOT NULL,
    request_hash bytea NOT NULL,
    answer       jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, mutation_id)
);
CREATE INDEX triage_mutations_created ON switchyard.triage_mutations (created_at);

-- The log and the note versions are history: refuse to change them.
-- +goose StatementBegin
CREATE FUNCTION switchyard.triage_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER triage_events_append_only BEFORE UPDATE OR DELETE ON switchyard.triage_events
    FOR EACH ROW EXECUTE FUNCTION switchyard.triage_refuse_change();
CREATE TRIGGER triage_note_versions_append_only BEFORE UPDATE OR DELETE ON switchyard.triage_note_versions
    FOR EACH ROW EXECUTE FUNCTION switchyard.triage_refuse_change();

-- switchyard.triage_track records that the failure (kind, ref) happened, in
-- the caller's transaction: it creates the item (event "created") or, if
-- the item was resolved, or ignored with no "until" still ahead, reopens it
-- (event "reopened", saying why). Either way it appends a "triage" change
-- to the change feed so every open board shows it. An item already open
-- is not touched: a burst of dead letters costs one index probe each, and
-- never waits on a person's mutation of an open item (a mutation that
-- replays from an item holds its row while it locks dead letters, so
-- waiting here could deadlock; replays are refused on resolved and ignored
-- items for the same reason).
-- +goose StatementBegin
CREATE FUNCTION switchyard.triage_track(p_kind text, p_ref jsonb, p_title text, p_why text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    it switchyard.triage_items;
BEGIN
    INSERT INTO switchyard.triage_items (kind, ref, title) VALUES (p_kind, p_ref, left(p_title, 512))
    ON CONFLICT (kind, ref) DO NOTHING
    RETURNING * INTO it;
    IF FOUND THEN
        INSERT INTO switchyard.triage_events (item_id, version, actor, op, detail)
        VALUES (it.id, it.version, 'system', 'created', jsonb_build_object('why', p_why));
    ELSE
        UPDATE switchyard.triage_items i
        SET status = 'open', ignored_until = NULL, version = i.version + 1, updated_at = now()
        WHERE i.kind = p_kind AND i.ref = p_ref
          AND (i.status = 'resolved' OR (i.status = 'ignored' AND (i.ignored_until IS NULL OR i.ignored_until <= now())))
        RETURNING * INTO it;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        INSERT INTO switchyard.triage_events (item_id, version, actor, op, detail)
        VALUES (it.id, it.version, 'system', 'reopened', jsonb_build_object('why', p_why));
    END IF;
    INSERT INTO switchyard.changes (kind, subject, payload)
    VALUES ('triage', it.id::text, jsonb_build_object('version', it.version, 'status', it.status));
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION switchyard.triage_track_dead_letter_group() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchyard.triage_track('dead_letter_group', jsonb_build_object('fingerprint', NEW.fingerprint),
        coalesce(nullif(NEW.sample_error, ''), 'Dead letters ' || NEW.fingerprint), CASE TG_OP WHEN 'INSERT' THEN 'first dead letter' ELSE 'a new dead letter in the group' END
            || ' (message ' || NEW.sample_id || ')');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- Only a new dead letter moves last_dead_at forward: replays, discards and
-- restores change the count alone and do not fire.
CREATE TRIGGER triage_dead_letter_group_new AFTER INSERT ON switchyard.dead_letter_groups
    FOR EACH ROW EXECUTE FUNCTION switchyard.triage_track_dead_letter_group();
CREATE TRIGGER triage_dead_letter_group_again AFTER UPDATE OF last_dead_at ON switchyard.dead_letter_groups
    FOR EACH ROW WHEN (NEW.last_dead_at > OLD.last_dead_at)
    EXECUTE FUNCTION switchyard.triage_track_dead_letter_group();

-- +goose StatementBegin
CREATE FUNCTION switchyard.triage_track_inbox_parked() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchyard.triage_track('inbox_failure_group',
        jsonb_build_object('source', NEW.source, 'fingerprint', coalesce(NEW.error_fingerprint, '')),
        NEW.source || ': ' || coalesce(NEW.last_error, 'parked events'), 'inbound event ' || NEW.event_id || ' parked');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER triage_inbox_parked_new AFTER INSERT ON switchyard.inbox_events
    FOR EACH ROW WHEN (NEW.status = 'parked')
    EXECUTE FUNCTION switchyard.triage_track_inbox_parked();
CREATE TRIGGER triage_inbox_parked_again AFTER UPDATE OF status ON switchyard.inbox_events
    FOR EACH ROW WHEN (NEW.status = 'parked' AND OLD.status <> 'parked')
    EXECUTE FUNCTION switchyard.triage_track_inbox_parked();

-- +goose StatementBegin
CREATE FUNCTION switchyard.triage_track_blocked_aggregate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM switchyard.triage_track('blocked_aggregate',
        jsonb_build_object('destination', NEW.destination, 'aggregate_type', NEW.aggregate_type, 'aggregate_id', NEW.aggregate_id),
        NEW.destination || ' ' || NEW.aggregate_type || '/' || NEW.aggregate_id,
        'blocked by dead message ' || NEW.dead_message_id);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER triage_blocked_aggregate_new AFTER INSERT ON switchyard.outbox_blocked_aggregates
    FOR EACH ROW EXECUTE FUNCTION switchyard.triage_track_blocked_aggregate();

-- Presence: who looks at the triage board and at each item right now, on
-- every console instance. One row per open WebSocket, refreshed by its
-- connection's heartbeat; a row whose tab or instance died expires on the
-- database clock and the next sweep of any instance deletes it and
-- announces the change (internal/triage/presence.go). Unlogged: presence
-- is ephemeral, and a crash of the server ends every socket anyway.
--   view  "board" or "item:<id>"
CREATE UNLOGGED TABLE switchyard.triage_presence (
    conn_id      uuid PRIMARY KEY,
    instance     text NOT NULL,
    account_id   bigint NOT NULL,
    account_name text NOT NULL,
    view         text NOT NULL CHECK (view ~ '^(board|item:[0-9]{1,19})$'),
    expires_at   timestamptz NOT NULL
);
CREATE INDEX triage_presence_view ON switchyard.triage_presence (view);
CREATE INDEX triage_presence_expires ON switchyard.triage_presence (expires_at);

-- +goose Down
DROP TABLE switchyard.triage_presence;
DROP TRIGGER triage_blocked_aggregate_new ON switchyard.outbox_blocked_aggregates;
DROP TRIGGER triage_inbox_parked_again ON switchyard.inbox_events;
DROP TRIGGER triage_inbox_parked_new ON switchyard.inbox_events;
DROP TRIGGER triage_dead_letter_group_again ON switchyard.dead_letter_groups;
DROP TRIGGER triage_dead_letter_group_new ON switchyard.dead_letter_groups;
DROP FUNCTION switchyard.triage_track_blocked_aggregate();
DROP FUNCTION switchyard.triage_track_inbox_parked();
DROP FUNCTION switchyard.triage_track_dead_letter_group();
DROP FUNCTION switchyard.triage_track(text, jsonb, text, text);
DROP TABLE switchyard.triage_mutations;
DROP TABLE switchyard.triage_note_versions;
DROP TABLE switchyard.triage_notes;
DROP TABLE switchyard.triage_events;
DROP TABLE switchyard.triage_items;
DROP FUNCTION switchyard.triage_refuse_change();
