-- +goose Up

-- The change feed: small rows that writers append in the same transaction as
-- a state change that live views must show (a message went dead, a breaker
-- opened, an inbox event failed, a triage item changed). After commit the
-- writer sends NOTIFY on switchyard_changes as a wake-up only; the payload
-- lives here, so a lost notification loses nothing.
--
-- Readers order by (xid, id), not by id alone: ids are taken at INSERT but
-- transactions commit in any order, so a reader that saw id 12 committed may
-- later see id 11 appear. A reader therefore reads only rows whose
-- transaction is older than pg_snapshot_xmin(pg_current_snapshot()): every
-- such transaction has finished, and every later one gets a larger xid, so
-- nothing can appear behind the reader's cursor. See internal/changefeed.
CREATE TABLE switchyard.changes (
    id         bigserial PRIMARY KEY,
    xid        xid8 NOT NULL DEFAULT pg_current_xact_id(),
    kind       text NOT NULL CHECK (kind ~ '^[a-z][a-z0-9_.]{0,63}$'),
    subject    text NOT NULL DEFAULT '' CHECK (length(subject) <= 512),
    -- Small by contract: what a view needs to know which region to
    -- refresh, never a message payload.
    payload    jsonb NOT NULL DEFAULT '{}' CHECK (octet_length(payload::text) <= 4096),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Catch-up and resume read in cursor order after a cursor.
CREATE UNIQUE INDEX changes_cursor ON switchyard.changes (xid, id);
-- Retention finds old rows without scanning the table every minute. The
-- feed carries state changes only (never each delivery), so the second
-- index costs writers little.
CREATE INDEX changes_created ON switchyard.changes (created_at);

-- Retention: rows are deleted in cursor order once older than the retention
-- window (internal/changefeed.Prune), and the highest cursor deleted is kept
-- here. A client cursor at or above it can be resumed from the table; one
-- below it may have missed rows that are gone, so it must resync.
CREATE TABLE switchyard.changes_pruned (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    xid        xid8 NOT NULL DEFAULT '0',
    id         bigint NOT NULL DEFAULT 0,
    pruned_at  timestamptz
);
INSERT INTO switchyard.changes_pruned DEFAULT VALUES;

-- +goose Down
DROP TABLE switchyard.changes_pruned;
DROP TABLE switchyard.changes;
