-- +goose Up

-- One definition of "dead" (issue 14, item 2): switchyard.console_messages'
-- status, where dead means dead and never replayed and replayed means dead,
-- then replayed. Every count, list and filter of dead messages reads it
-- (internal/queries/sql); a query that must find dead messages through the
-- partial indexes on state = 'dead' adds that condition, which both dead
-- and replayed imply, so that the index serves it.
--
-- The planner knows nothing of the status expression by itself: it would
-- guess that a status is 0.5 % of the rows whatever the table holds, which
-- turns a walk of the dead messages in id order into a bitmap scan and
-- sort of a whole topic. These statistics give it the joint distribution
-- of state, replays and status (ANALYZE keeps them), so "state = 'dead'
-- AND status = 'dead'" is estimated from what the table holds, and so is
-- the same condition written on the columns ("state = 'dead' AND replays
-- = 0", which the columns' own statistics, taken as independent, estimate
-- wrongly once many dead messages were replayed). The expression is the
-- view's, as written there: the planner matches it by its form.
CREATE STATISTICS switchyard.outbox_status (mcv)
    ON state, replays, (CASE WHEN state = 'dead' AND replays > 0 THEN 'replayed' ELSE state END)
    FROM switchyard.outbox;
ANALYZE switchyard.outbox;

-- console_messages_estimate, the list's "about N" (00017, 00020), reads
-- the state filter from the view's status too, instead of spelling dead
-- and replayed on the columns; the statistics above estimate it.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION switchyard.console_messages_estimate(
    state text, topic text, topic_prefix text, destination text, destination_prefix text,
    aggregate_type text, aggregate_id text, error_text text,
    created_from timestamptz, created_to timestamptz,
    stage text DEFAULT NULL, lease_owner_pattern text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$ -- EXPLAIN is refused in a STABLE function
DECLARE
    q text := 'SELECT 1 FROM switchyard.console_messages o WHERE true';
    plan json;
BEGIN
    IF state IS NOT NULL THEN
        q := q || format(' AND o.status = %L', state);
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

-- replay_candidates is the dead messages a bulk replay job replays (its
-- filter, internal/bulkreplay.Filter; NULL: any): the one spelling of it
-- that the job's batches (ReplayJobListCandidates), its count and the
-- planner's estimate of it (ReplayJobCount, replay_candidates_estimate)
-- share. A set-returning SQL function that is STABLE and not STRICT is
-- inlined into the query that calls it, so each of those is planned as if
-- it had written the conditions itself, with the indexes they can use
-- (internal/bulkreplay/EXPLAIN.md). Parameters are named after the
-- function (replay_candidates.topic), since a column of the same name
-- would win. Topic, destination, error and created_at mean what the
-- message list's filters mean (internal/msgfilter): a prefix is one range
-- of the text_pattern_ops indexes outbox_topic_id / outbox_destination_id.
-- +goose StatementBegin
CREATE FUNCTION switchyard.replay_candidates(
    fingerprint text, destination text, destination_prefix text, destination_upper text,
    topic text, topic_prefix text, topic_upper text, aggregate_type text, aggregate_id text,
    error_text text, dead_from timestamptz, dead_to timestamptz,
    created_from timestamptz, created_to timestamptz, blocked_heads boolean)
RETURNS TABLE (id bigint) LANGUAGE sql STABLE AS $$
SELECT o.id FROM switchyard.console_messages o
WHERE o.state = 'dead' AND o.status = 'dead'
  AND (replay_candidates.fingerprint IS NULL OR o.error_fingerprint = replay_candidates.fingerprint)
  AND (replay_candidates.destination IS NULL OR o.destination = replay_candidates.destination)
  AND (replay_candidates.destination_prefix IS NULL OR (o.destination ~>=~ replay_candidates.destination_prefix AND o.destination ~<~ replay_candidates.destination_upper))
  AND (replay_candidates.topic IS NULL OR o.topic = replay_candidates.topic)
  AND (replay_candidates.topic_prefix IS NULL OR (o.topic ~>=~ replay_candidates.topic_prefix AND o.topic ~<~ replay_candidates.topic_upper))
  AND (replay_candidates.aggregate_type IS NULL OR o.aggregate_type = replay_candidates.aggregate_type)
  AND (replay_candidates.aggregate_id IS NULL OR o.aggregate_id = replay_candidates.aggregate_id)
  AND (replay_candidates.error_text IS NULL OR substr(o.last_error, 1, 512) ILIKE '%' || replay_candidates.error_text || '%')
  AND (replay_candidates.dead_from IS NULL OR o.finished_at >= replay_candidates.dead_from)
  AND (replay_candidates.dead_to IS NULL OR o.finished_at < replay_candidates.dead_to)
  AND (replay_candidates.created_from IS NULL OR o.created_at >= replay_candidates.created_from)
  AND (replay_candidates.created_to IS NULL OR o.created_at < replay_candidates.created_to)
  -- blocked_heads: only the dead heads their aggregates wait behind
  -- (outbox_blocked_aggregates_dead_message).
  AND (NOT replay_candidates.blocked_heads OR EXISTS (
      SELECT 1 FROM switchyard.outbox_blocked_aggregates b WHERE b.dead_message_id = o.id))
$$;
-- +goose StatementEnd

-- replay_candidates_estimate is the planner's estimate of how many of
-- replay_candidates' messages have an id from floor_id to ceiling_id: it asks
-- EXPLAIN, which reads the table's statistics and no row, with the
-- filter's values bound (EXECUTE ... USING), so the estimate is the one a
-- query with those values would be planned with.
-- +goose StatementBegin
CREATE FUNCTION switchyard.replay_candidates_estimate(
    fingerprint text, destination text, destination_prefix text, destination_upper text,
    topic text, topic_prefix text, topic_upper text, aggregate_type text, aggregate_id text,
    error_text text, dead_from timestamptz, dead_to timestamptz,
    created_from timestamptz, created_to timestamptz, blocked_heads boolean,
    floor_id bigint, ceiling_id bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$ -- EXPLAIN is refused in a STABLE function
DECLARE
    plan json;
BEGIN
    EXECUTE 'EXPLAIN (FORMAT JSON) SELECT 1 FROM switchyard.replay_candidates('
        '$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) c '
        'WHERE c.id >= $16 AND c.id <= $17'
    INTO plan
    USING fingerprint, destination, destination_prefix, destination_upper, topic, topic_prefix, topic_upper,
        aggregate_type, aggregate_id, error_text, dead_from, dead_to, created_from, created_to, blocked_heads,
        floor_id, ceiling_id;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::bigint;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION switchyard.replay_candidates_estimate(text, text, text, text, text, text, text, text, text, text,
    timestamptz, timestamptz, timestamptz, timestamptz, boolean, bigint, bigint);
DROP FUNCTION switchyard.replay_candidates(text, text, text, text, text, text, text, text, text, text,
    timestamptz, timestamptz, timestamptz, timestamptz, boolean);
-- The estimate as 00020 made it (before the statistics it reads go).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION switchyard.console_messages_estimate(
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
DROP STATISTICS switchyard.outbox_status;
