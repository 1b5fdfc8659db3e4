-- +goose Up

-- switchyard.demo_customer_upsert is the demo handler's "create the
-- customer if absent, else update it" (internal/democustomer) in one
-- round trip instead of two or three: the handler runs for every inbound
-- event, and on a 2-core machine each statement sent is a measurable share
-- of the inbox's throughput.
--
-- The race it closes is the one internal/advisory documents: two
-- transactions both find no customer and both insert (external_id is
-- deliberately not unique). It takes the advisory lock on the customer's
-- key, computed by advisory.Key in Go, first without waiting, then through
-- switchyard.advisory_xact_lock, which waits at most timeout_ms and raises
-- lock_not_available (55P03) after that. The check-then-insert comes after
-- the lock, as a statement of its own: in READ COMMITTED each statement of
-- a VOLATILE function takes a new snapshot, so it sees the customer that a
-- previous holder of the lock committed. It returns whether it created the
-- customer.
-- +goose StatementBegin
CREATE FUNCTION switchyard.demo_customer_upsert(
    lock_key bigint, timeout_ms integer, p_external_id text, p_name text, p_email text
) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(lock_key) THEN
        PERFORM switchyard.advisory_xact_lock(lock_key, timeout_ms);
    END IF;
    INSERT INTO switchyard.demo_customers (external_id, name, email)
    SELECT p_external_id, p_name, p_email
    WHERE NOT EXISTS (SELECT 1 FROM switchyard.demo_customers c WHERE c.external_id = p_external_id);
    IF FOUND THEN
        RETURN true;
    END IF;
    UPDATE switchyard.demo_customers c SET name = p_name, email = p_email, updated_at = now()
    WHERE c.external_id = p_external_id;
    RETURN false;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION switchyard.demo_customer_upsert(bigint, integer, text, text, text);
