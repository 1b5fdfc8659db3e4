-- +goose Up

-- Topic and destination filters take a prefix (`order.*` or `order.`
-- matches `order.created`; issue 14, item 10). The two partial indexes of
-- the message browser become text_pattern_ops: they compare bytes, so a
-- prefix is one range (`~>=~ prefix AND ~<~ the next string`) whatever the
-- database's collation, and they still serve equality. They replace the
-- indexes of 00010 rather than joining them: the dispatcher pays for every
-- index a finalize changes (ARCHITECTURE.md, Engine).
DROP INDEX switchyard.outbox_topic_id;
DROP INDEX switchyard.outbox_destination_id;
CREATE INDEX outbox_topic_id ON switchyard.outbox (topic text_pattern_ops, id) WHERE state <> 'delivered';
CREATE INDEX outbox_destination_id ON switchyard.outbox (destination text_pattern_ops, id) WHERE state <> 'delivered';

-- console_messages_estimate is the planner's estimate of how many messages
-- match the message browser's filters (NULL: any): the list's "about N"
-- total, where an exact count would walk every matching row. It asks
-- EXPLAIN, which reads the table's statistics and no row; every value is
-- quoted with format's %L.
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

-- +goose Down
DROP FUNCTION switchyard.console_messages_estimate(text, text, text, text, text, text, text, text, timestamptz, timestamptz);
DROP INDEX switchyard.outbox_destination_id;
DROP INDEX switchyard.outbox_topic_id;
CREATE INDEX outbox_topic_id ON switchyard.outbox (topic, id) WHERE state <> 'delivered';
CREATE INDEX outbox_destination_id ON switchyard.outbox (destination, id) WHERE state <> 'delivered';
