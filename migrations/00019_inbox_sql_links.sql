-- +goose Up

-- A 'sql' source's function now has the outbox messages it enqueues linked
-- to its event (switchyard.inbox_event_messages, the event's page), as
-- forward and Go handlers do (issue 14, item 6). No trigger on the outbox:
-- that would cost every enqueue, not only the inbox's.
--
-- inbox_call(fn, event, headers, inbox_event_id) calls fn as the 3-argument
-- version does, then links inbox_event_id to the outbox rows the call wrote.
-- Which rows those are:
-- - id > bound, where bound is an id taken with nextval just before the
--   call. Within one session nextval only grows, whatever the sequence's
--   CACHE (a cached range is this session's alone), so every row the call
--   inserts has a greater id; the outbox's primary key bounds the scan to
--   the rows inserted since, by anyone. The id taken is never used: one gap
--   per call, like a rolled-back insert's.
-- - written by this transaction: xmin is its xid, or the xid of one of its
--   subtransactions that was kept (the function's EXCEPTION blocks, its
--   savepoints). Such a row is visible to this statement, and its xid's
--   status is 'in progress' (pg_xact_status answers so for this
--   transaction's own xids). A row of another transaction is visible only
--   once that transaction has committed and left the process array, after
--   which its status is 'committed'; one still running is not visible at
--   all. So no row of a concurrent transaction is ever linked. A
--   subtransaction's xid is newer than its top transaction's: a row whose
--   xmin is older is not ours, and is not looked up; for a newer one the
--   64-bit xid is the top's plus the distance, so pg_xact_status is never
--   asked about an xid from the future.
-- A row in a subtransaction that was rolled back is gone, and not linked.
-- A row of another transaction that the function updated is linked too
-- (its new version is this transaction's): functions enqueue, they do not
-- update the outbox.
-- With inbox_event_id NULL nothing is linked.
-- Its plan, the 13th call on an outbox of 300,000 rows (plpgsql keeps
-- planning it with bound and top known; 0.2 ms):
--   Insert on inbox_event_messages
--     ->  Index Scan using outbox_pkey on outbox o  (rows=1)
--           Index Cond: (id > '300025'::bigint)
--           Filter: CASE WHEN (xmin = '965'::xid) THEN true ... END
--
-- The 3-argument version stays for the binaries still running during an
-- upgrade; nothing in this release calls it.
-- +goose StatementBegin
CREATE FUNCTION switchyard.inbox_call(fn text, event jsonb, headers jsonb, inbox_event_id bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    bound bigint;
    top xid8;
BEGIN
    IF fn IS NULL OR fn !~ '^[a-z_][a-z0-9_]{0,62}\.[a-z_][a-z0-9_]{0,62}$' THEN
        RAISE EXCEPTION 'inbox_call: invalid function name %', fn USING ERRCODE = '22023';
    END IF;
    IF inbox_event_id IS NOT NULL THEN
        bound := nextval('switchyard.outbox_id_seq');
    END IF;
    EXECUTE format('SELECT %I.%I($1, $2)', split_part(fn, '.', 1), split_part(fn, '.', 2))
        USING event, headers;
    IF inbox_event_id IS NULL THEN
        RETURN;
    END IF;
    top := pg_current_xact_id_if_assigned();
    IF top IS NULL THEN
        RETURN; -- this transaction has written nothing
    END IF;
    INSERT INTO switchyard.inbox_event_messages (inbox_event_id, outbox_id)
    SELECT inbox_call.inbox_event_id, o.id
    FROM switchyard.outbox o,
         LATERAL (SELECT (o.xmin::text::bigint - top::xid::text::bigint + 4294967296) % 4294967296 AS ahead) d
    WHERE o.id > bound
      AND CASE
          WHEN o.xmin = top::xid THEN true
          WHEN d.ahead >= 2147483648 THEN false
          ELSE pg_xact_status((top::text::bigint + d.ahead)::text::xid8) = 'in progress'
          END
    ON CONFLICT DO NOTHING;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION switchyard.inbox_call(text, jsonb, jsonb, bigint);
