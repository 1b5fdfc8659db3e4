-- +goose Up

-- A failure that happens while a person's mutation of its item is in
-- flight must not be hidden by it. switchyard.triage_track (00065) saw the
-- item's committed status and, when it was not settled, did nothing: a
-- resolve that had locked the item and not yet written it committed
-- "resolved" right after the new dead letter, and the item stayed
-- resolved. Waiting for the mutation is no way out (a replay from the item
-- holds its row while it locks dead letters: a failure's transaction that
-- waited here could deadlock with it), and its INSERT ... ON CONFLICT
-- waited anyway once the mutation had written the row.
--
-- Now triage_track never waits for a mutation. It looks the item up first
-- (inserting only a new one), reopens a settled one as before, and for
-- one that is not settled takes FOR KEY SHARE on its row, SKIP LOCKED:
-- - got it: no mutation is in flight, and none can lock the item until
--   this failure has committed, so a later resolve comes after it;
-- - the row is locked (TriageItemLock's FOR UPDATE): a mutation is in
--   flight, and may be settling the item. The failure is recorded in
--   triage_reopen_pending (no foreign key: its check would wait for the
--   lock), and switchyard.triage_reopen_pending_apply reopens the item
--   once that mutation has committed, if it settled it: the engine calls
--   it after each settle, every console instance every few seconds.

CREATE TABLE switchyard.triage_reopen_pending (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    item_id      bigint NOT NULL,
    -- seen_version is the item's committed version when the failure came.
    seen_version bigint NOT NULL,
    why          text NOT NULL,
    at           timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- switchyard.triage_reopen reopens item p_id (locked by the caller or
-- matched by its UPDATE) with event "reopened" saying why, and announces
-- it on the change feed.
-- +goose StatementBegin
CREATE FUNCTION switchyard.triage_reopen(p_it switchyard.triage_items, p_why text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO switchyard.triage_events (item_id, version, actor, op, detail)
    VALUES (p_it.id, p_it.version, 'system', 'reopened', jsonb_build_object('why', p_why));
    INSERT INTO switchyard.changes (kind, subject, payload)
    VALUES ('triage', p_it.id::text, jsonb_build_object('version', p_it.version, 'status', p_it.status));
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION switchyard.triage_track(p_kind text, p_ref jsonb, p_title text, p_why text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    it switchyard.triage_items;
    item_id bigint;
BEGIN
    SELECT i.id INTO item_id FROM switchyard.triage_items i WHERE i.kind = p_kind AND i.ref = p_ref;
    IF NOT FOUND THEN
        INSERT INTO switchyard.triage_items (kind, ref, title) VALUES (p_kind, p_ref, left(p_title, 512))
        ON CONFLICT (kind, ref) DO NOTHING
        RETURNING * INTO it;
        IF FOUND THEN
            INSERT INTO switchyard.triage_events (item_id, version, actor, op, detail)
            VALUES (it.id, it.version, 'system', 'created', jsonb_build_object('why', p_why));
            INSERT INTO switchyard.changes (kind, subject, payload)
            VALUES ('triage', it.id::text, jsonb_build_object('version', it.version, 'status', it.status));
            RETURN;
        END IF;
        -- Created meanwhile by another failure: as an existing one.
        SELECT i.id INTO item_id FROM switchyard.triage_items i WHERE i.kind = p_kind AND i.ref = p_ref;
    END IF;
    FOR attempt IN 1..2 LOOP
        UPDATE switchyard.triage_items i
        SET status = 'open', ignored_until = NULL, version = i.version + 1, updated_at = now()
        WHERE i.id = item_id
          AND (i.status = 'resolved' OR (i.status = 'ignored' AND (i.ignored_until IS NULL OR i.ignored_until <= now())))
        RETURNING * INTO it;
        IF FOUND THEN
            PERFORM switchyard.triage_reopen(it, p_why);
            RETURN;
        END IF;
        SELECT * INTO it FROM switchyard.triage_items i WHERE i.id = item_id FOR KEY SHARE SKIP LOCKED;
        IF NOT FOUND THEN
            INSERT INTO switchyard.triage_reopen_pending (item_id, seen_version, why)
            SELECT i.id, i.version, p_why FROM switchyard.triage_items i WHERE i.id = item_id;
            RETURN;
        END IF;
        -- Held now: settled by a mutation that committed since the UPDATE's
        -- snapshot? Then once more; else this failure is before any settle.
        EXIT WHEN NOT (it.status = 'resolved' OR (it.status = 'ignored' AND (it.ignored_until IS NULL OR it.ignored_until <= now())));
    END LOOP;
END
$$;
-- +goose StatementEnd

-- switchyard.triage_reopen_pending_apply handles up to p_limit recorded
-- failures, oldest first: it waits for the mutation that held the item
-- (FOR UPDATE) and reopens the item if that mutation settled it (the
-- latest status change is a person's, begun before the failure was
-- recorded: a settle begun later came after the failure). Returns how
-- many items it reopened. Any number of callers at once: each takes
-- other rows (SKIP LOCKED).
-- +goose StatementBegin
CREATE FUNCTION switchyard.triage_reopen_pending_apply(p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    p switchyard.triage_reopen_pending;
    it switchyard.triage_items;
    n integer := 0;
BEGIN
    FOR p IN
        DELETE FROM switchyard.triage_reopen_pending d
        WHERE d.id IN (SELECT q.id FROM switchyard.triage_reopen_pending q ORDER BY q.id LIMIT p_limit FOR UPDATE SKIP LOCKED)
        RETURNING d.*
    LOOP
        SELECT * INTO it FROM switchyard.triage_items i WHERE i.id = p.item_id FOR UPDATE;
        CONTINUE WHEN NOT FOUND;
        CONTINUE WHEN NOT (it.status = 'resolved' OR (it.status = 'ignored' AND (it.ignored_until IS NULL OR it.ignored_until <= now())));
        CONTINUE WHEN NOT EXISTS (
            SELECT 1 FROM (
                SELECT e.op, e.at FROM switchyard.triage_events e
                WHERE e.item_id = it.id AND e.version > p.seen_version AND e.op IN ('status', 'reopened')
                ORDER BY e.version DESC LIMIT 1
            ) latest
            WHERE latest.op = 'status' AND latest.at <= p.at);
        UPDATE switchyard.triage_items i
        SET status = 'open', ignored_until = NULL, version = i.version + 1, updated_at = now()
        WHERE i.id = it.id
        RETURNING * INTO it;
        PERFORM switchyard.triage_reopen(it, p.why);
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION switchyard.triage_reopen_pending_apply(integer);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION switchyard.triage_track(p_kind text, p_ref jsonb, p_title text, p_why text) RETURNS void
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
DROP FUNCTION switchyard.triage_reopen(switchyard.triage_items, text);
DROP TABLE switchyard.triage_reopen_pending;
