-- +goose Up

-- The audit trail (internal/audit): one row per operator action, sign-in,
-- sign-out, failed sign-in, password change and revocation, written in the
-- same transaction as the effect it records (invariant 7).
--
-- Append-only, enforced here and not only in the application: a trigger
-- refuses every UPDATE, DELETE and TRUNCATE. Hash-chained: each row's hash
-- covers its content and the previous row's hash, so an edit made by someone
-- who bypassed the trigger (a superuser) breaks the chain at that row, which
-- audit.Verify (and `console audit verify`) reports.
--
-- Ids are assigned by the chaining trigger after it took the chain's lock,
-- so id order is chain order: the lock is held until the writer commits,
-- and the next writer's statement (READ COMMITTED) then sees that row.
CREATE SEQUENCE switchyard.audit_log_id_seq;

CREATE TABLE switchyard.audit_log (
    id          bigint PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    -- actor is the account name as it was then (or "cli", "demo"):
    -- history outlives accounts, so there is no foreign key.
    actor       text NOT NULL,
    actor_id    bigint,
    action      text NOT NULL CHECK (action ~ '^[a-z][a-z0-9_.]{0,63}$'),
    target      text NOT NULL DEFAULT '',
    reason      text NOT NULL DEFAULT '',
    outcome     text NOT NULL CHECK (outcome IN ('ok', 'denied', 'failed')),
    request_id  text NOT NULL DEFAULT '',
    remote_addr text NOT NULL DEFAULT '',
    detail      jsonb NOT NULL DEFAULT '{}',
    prev_hash   bytea NOT NULL,
    hash        bytea NOT NULL
);
ALTER SEQUENCE switchyard.audit_log_id_seq OWNED BY switchyard.audit_log.id;
CREATE INDEX audit_log_actor ON switchyard.audit_log (actor, id);
CREATE INDEX audit_log_action ON switchyard.audit_log (action, id);

-- audit_row_hash is the chain's hash of one row: SHA-256 of the previous
-- row's hash followed by the row's fields as a JSON array (jsonb's text
-- form is canonical; the time as epoch seconds, independent of TimeZone).
-- +goose StatementBegin
CREATE FUNCTION switchyard.audit_row_hash(prev bytea, r switchyard.audit_log) RETURNS bytea
LANGUAGE sql STABLE AS $$
    SELECT sha256(prev || convert_to(jsonb_build_array(
        r.id, extract(epoch FROM r.at)::text, r.actor, r.actor_id, r.action, r.target,
        r.reason, r.outcome, r.request_id, r.remote_addr, r.detail)::text, 'UTF8'))
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION switchyard.audit_log_chain() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- One writer at a time extends the chain; held until commit.
    PERFORM pg_advisory_xact_lock(hashtextextended('switchyard.audit_log', 0));
    NEW.id := nextval('switchyard.audit_log_id_seq');
    SELECT a.hash INTO NEW.prev_hash FROM switchyard.audit_log a ORDER BY a.id DESC LIMIT 1;
    NEW.prev_hash := coalesce(NEW.prev_hash, '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea);
    NEW.hash := switchyard.audit_row_hash(NEW.prev_hash, NEW);
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION switchyard.audit_log_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'switchyard.audit_log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_log_chain BEFORE INSERT ON switchyard.audit_log
    FOR EACH ROW EXECUTE FUNCTION switchyard.audit_log_chain();
CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON switchyard.audit_log
    FOR EACH ROW EXECUTE FUNCTION switchyard.audit_log_refuse_change();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON switchyard.audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION switchyard.audit_log_refuse_change();

-- +goose Down
DROP FUNCTION switchyard.audit_row_hash(bytea, switchyard.audit_log);
DROP TABLE switchyard.audit_log;
DROP FUNCTION switchyard.audit_log_refuse_change();
DROP FUNCTION switchyard.audit_log_chain();
