-- +goose Up

-- inbox_claim is the inbox's claim of an event without an entity version
-- (internal/queries InboxEventClaim) as a function, so that a Go
-- handler's own statement can claim the event and apply its effect in one
-- round trip (inbox.Registration.Once) without repeating the inbox's
-- tables in its SQL:
--
--     SELECT c.event_row, CASE WHEN c.event_row > 0 THEN team.apply(...) END
--     FROM switchyard.inbox_claim($1, $2, $3, $4, $5) AS c (event_row)
--
-- It records the event as processed and returns its id, taking a failed
-- event again as the claim does; or, for a duplicate (recorded already,
-- or being applied by a transaction that then commits: the insert waits
-- for it), counts it in the source's duplicate counter and the event's
-- own record of duplicates and returns 0. The caller applies its effect
-- only for an id above 0, in the same statement, hence the same
-- transaction: the record and the effect commit together or not at all.
-- +goose StatementBegin
CREATE FUNCTION switchyard.inbox_claim(
    p_source text, p_event_id text, p_headers json, p_payload json, p_slot smallint
) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    claimed bigint;
BEGIN
    INSERT INTO switchyard.inbox_events AS e (source, event_id, headers, payload, entity_key, status, processed_at)
    VALUES (p_source, p_event_id, p_headers, p_payload, '', 'processed', now())
    ON CONFLICT (source, event_id) DO UPDATE SET status = 'processed', processed_at = now()
        WHERE e.status = 'failed'
    RETURNING e.id INTO claimed;
    IF claimed IS NOT NULL THEN
        RETURN claimed;
    END IF;
    INSERT INTO switchyard.inbox_duplicates AS d (source, slot, count) VALUES (p_source, p_slot, 1)
    ON CONFLICT (source, slot) DO UPDATE SET count = d.count + 1, updated_at = now();
    INSERT INTO switchyard.inbox_event_duplicates (source, event_id) VALUES (p_source, p_event_id);
    RETURN 0;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION switchyard.inbox_claim(text, text, json, json, smallint);
