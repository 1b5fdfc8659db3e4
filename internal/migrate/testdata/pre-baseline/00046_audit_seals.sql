-- +goose Up

-- Seals anchor the audit trail's hash chain to a key the database does not
-- hold (internal/audit, seal.go). The chain's own hash (audit_row_hash) can
-- be recomputed by anyone who can write the table: edit a row, recompute
-- the hashes after it with the schema's own function, and the chain
-- verifies. A seal is an HMAC of a row's id and hash under a key kept
-- outside the database (console serve --audit-key-file), written by the
-- console shortly after the row: re-chained rows no longer match their
-- seals, and nobody without the key can make new ones.
--
-- Append-only like the trail itself. No foreign key to the trail: TRUNCATE
-- of the trail must still meet its own refusal, and a seal whose row is
-- gone is evidence (audit.Check reports it).
CREATE TABLE switchyard.audit_seals (
    id        bigint PRIMARY KEY,
    mac       bytea NOT NULL CHECK (length(mac) = 32),
    sealed_at timestamptz NOT NULL DEFAULT now()
);

-- +goose StatementBegin
CREATE FUNCTION switchyard.audit_seals_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'switchyard.audit_seals is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_seals_no_update BEFORE UPDATE OR DELETE ON switchyard.audit_seals
    FOR EACH ROW EXECUTE FUNCTION switchyard.audit_seals_refuse_change();
CREATE TRIGGER audit_seals_no_truncate BEFORE TRUNCATE ON switchyard.audit_seals
    FOR EACH STATEMENT EXECUTE FUNCTION switchyard.audit_seals_refuse_change();

-- +goose Down
DROP TABLE switchyard.audit_seals;
DROP FUNCTION switchyard.audit_seals_refuse_change();
