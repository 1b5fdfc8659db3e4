-- +goose Up

-- The dashboard's figures of pending messages link to the messages they
-- count (issue 14, item 9): a dispatcher's leases to the messages it holds,
-- the In flight, Retrying and Pending tiles to the messages in that stage.
-- The message browser filters on them with the definitions the statistics
-- leader counts with (StatsPendingFlowList, internal/queries/sql/stats_snapshot.sql):
--   queued     pending, not leased, never attempted;
--   in_flight  pending and leased (lease_owner set by the claim, cleared by
--              the finalize);
--   retrying   pending, not leased, attempted at least once.
-- A dispatcher's workers lease as "<owner>/<n>" (internal/outbox,
-- Dispatcher.run): the messages a dispatcher holds are the pending ones
-- whose lease_owner matches ^<owner>/[0-9]+$ (the console builds the
-- pattern, the lists and the estimate apply it).
--
-- No index on lease_owner: the claim and the finalize change it, and an
-- index on it would make every claim of an ordered message non-HOT (today
-- it changes no indexed column; BENCHMARKS.md, "HOT claims of ordered
-- messages") and add an entry to every claim. These filters imply
-- state = 'pending', so the lists walk outbox_pending_id (00011): the
-- backlog only, and at most 25,000 of its messages per page
-- (internal/console/messages_list.go, scanWindow).
--
-- The view gains the lease holder as its last column: CREATE OR REPLACE
-- VIEW may only add columns at the end.
CREATE OR REPLACE VIEW switchyard.console_messages AS
SELECT o.id, o.message_id, o.topic, o.destination, o.aggregate_type, o.aggregate_id, o.aggregate_seq,
    o.state, o.attempts, o.last_error, o.error_fingerprint, o.created_at, o.finished_at, o.replay_of,
    (CASE WHEN o.state = 'dead' AND o.replays > 0 THEN 'replayed' ELSE o.state END)::text AS status,
    coalesce(CASE WHEN o.replays > 0 THEN
        (SELECT r.state FROM switchyard.outbox r WHERE r.replay_of = o.id ORDER BY r.id DESC LIMIT 1)
    END, '')::text AS replay_outcome,
    o.lease_owner
FROM switchyard.outbox o;

-- console_messages_estimate (00017) takes the two new filters, last and
-- optional, so that a call with the first ten still works. A lease is
-- estimated without "state = 'pending'", which it implies (only the
-- finalize moves a message out of pending, and it clears the lease): the
-- planner multiplies the selectivities of the two as if independent. The
-- planner estimates the pattern from lease_owner's statistics (it matches
-- the most common values against it).
DROP FUNCTION switchyard.console_messages_estimate(text, text, text, text, text, text, text, text, timestamptz, timestamptz);
-- +goose StatementBegin
CREATE FUNCTION switchyard.console_messages_estimate(
    state text, topic text, topic_prefix text, destination text, destination_prefix text,
    aggregate_type text, aggregate_id text, error_text text,
    created_from timestamptz, created_to timestamptz,
    stage text DEFAULT NULL, lease_owner_pattern text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$ -- EXPLAIN is refused in a STABLE function
DECLARE
    q text := 'SELECT 1 FROM switchyard.outbox o WHERE true';
    plan json;
BEGIN
    IF state = 'dead' THEN
        q := q || ' AND o.state = ''dead'' AND o.replays = 0';
    ELSIF state = 'replayed' THEN
        q := q || ' AND o.state = ''dead'' AND o.replays > 0';
    ELSIF state IS NOT NULL THEN
        q := q || format(' AND o.state = %L', state);
    END IF;
    IF topic IS NOT NULL THEN
        q := q || format(' AND o.topic = %L', topic);
    END IF;
    IF topic_prefix IS NOT NULL THEN
        q := q || format(' AND o.topic LIKE %L', replace(replace(replace(topic_prefix, '\', '\\'), '%', '\%'), '_', '\_') || '%');
    END IF;
    IF destination IS NOT NULL THEN
        q := q || format(' AND o.destination = %L', destination);
    END IF;
    IF destination_prefix IS NOT NULL THEN
        q := q || format(' AND o.destination LIKE %L', replace(replace(replace(destination_prefix, '\', '\\'), '%', '\%'), '_', '\_') || '%');
    END IF;
    IF aggregate_type IS NOT NULL THEN
        q := q || format(' AND o.aggregate_type = %L', aggregate_type);
    END IF;
    IF aggregate_id IS NOT NULL THEN
        q := q || format(' AND o.aggregate_id = %L', aggregate_id);
    END IF;
    IF error_text IS NOT NULL THEN
        q := q || format(' AND substr(o.last_error, 1, 512) ILIKE %L', '%' || error_text || '%');
    END IF;
    IF created_from IS NOT NULL THEN
        q := q || format(' AND o.created_at >= %L', created_from);
    END IF;
    IF created_to IS NOT NULL THEN
        q := q || format(' AND o.created_at < %L', created_to);
    END IF;
    IF stage = 'queued' THEN
        q := q || ' AND o.state = ''pending'' AND o.lease_owner IS NULL AND o.attempts = 0';
    ELSIF stage = 'in_flight' THEN
        q := q || ' AND o.lease_owner IS NOT NULL';
    ELSIF stage = 'retrying' THEN
        q := q || ' AND o.state = ''pending'' AND o.lease_owner IS NULL AND o.attempts > 0';
    ELSIF stage IS NOT NULL THEN
        q := q || ' AND false';
    END IF;
    IF lease_owner_pattern IS NOT NULL THEN
        q := q || format(' AND o.lease_owner ~ %L', lease_owner_pattern);
    END IF;
    EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO plan;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::bigint;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION switchyard.console_messages_estimate(text, text, text, text, text, text, text, text, timestamptz, timestamptz, text, text);
-- +goose StatementBegin
CREATE FUNCTION switchyard.console_messages_estimate(
    state text, topic text, topic_prefix text, destination text, destination_prefix text,
    aggregate_type text, aggregate_id text, error_text text,
    created_from timestamptz, created_to timestamptz) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$ -- EXPLAIN is refused in a STABLE function
DECLARE
    q text := 'SELECT 1 FROM switchyard.outbox o WHERE true';
    plan json;
BEGIN
    IF state = 'dead' THEN
        q := q || ' AND o.state = ''dead'' AND o.replays = 0';
    ELSIF state = 'replayed' THEN
        q := q || ' AND o.state = ''dead'' AND o.replays > 0';
    ELSIF state IS NOT NULL THEN
        q := q || format(' AND o.state = %L', state);
    END IF;
    IF topic IS NOT NULL THEN
        q := q || format(' AND o.topic = %L', topic);
    END IF;
    IF topic_prefix IS NOT NULL THEN
        q := q || format(' AND o.topic LIKE %L', replace(replace(replace(topic_prefix, '\', '\\'), '%', '\%'), '_', '\_') || '%');
    END IF;
    IF destination IS NOT NULL THEN
        q := q || format(' AND o.destination = %L', destination);
    END IF;
    IF destination_prefix IS NOT NULL THEN
        q := q || format(' AND o.destination LIKE %L', replace(replace(replace(destination_prefix, '\', '\\'), '%', '\%'), '_', '\_') || '%');
    END IF;
    IF aggregate_type IS NOT NULL THEN
        q := q || format(' AND o.aggregate_type = %L', aggregate_type);
    END IF;
    IF aggregate_id IS NOT NULL THEN
        q := q || format(' AND o.aggregate_id = %L', aggregate_id);
    END IF;
    IF error_text IS NOT NULL THEN
        q := q || format(' AND substr(o.last_error, 1, 512) ILIKE %L', '%' || error_text || '%');
    END IF;
    IF created_from IS NOT NULL THEN
        q := q || format(' AND o.created_at >= %L', created_from);
    END IF;
    IF created_to IS NOT NULL THEN
        q := q || format(' AND o.created_at < %L', created_to);
    END IF;
    EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO plan;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::bigint;
END
$$;
-- +goose StatementEnd
-- The view as 00011 made it: a column cannot be dropped by CREATE OR
-- REPLACE VIEW.
DROP VIEW switchyard.console_messages;
CREATE VIEW switchyard.console_messages AS
SELECT o.id, o.message_id, o.topic, o.destination, o.aggregate_type, o.aggregate_id, o.aggregate_seq,
    o.state, o.attempts, o.last_error, o.error_fingerprint, o.created_at, o.finished_at, o.replay_of,
    (CASE WHEN o.state = 'dead' AND o.replays > 0 THEN 'replayed' ELSE o.state END)::text AS status,
    coalesce(CASE WHEN o.replays > 0 THEN
        (SELECT r.state FROM switchyard.outbox r WHERE r.replay_of = o.id ORDER BY r.id DESC LIMIT 1)
    END, '')::text AS replay_outcome
FROM switchyard.outbox o;
