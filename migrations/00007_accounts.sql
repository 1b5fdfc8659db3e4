-- +goose Up

-- Local accounts of the console (internal/auth). Passwords are stored as
-- PHC-style argon2id strings that carry their own parameters, so the
-- parameters can be raised later without invalidating old hashes.
CREATE TABLE switchyard.users (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9._@-]{0,63}$'),
    role                text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    password_hash       text NOT NULL,
    disabled_at         timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    password_changed_at timestamptz NOT NULL DEFAULT now()
);

-- Server-side sessions. Only the SHA-256 of the 256-bit token is stored: a
-- copy of this table does not let anyone sign in. A session ends at
-- expires_at (absolute), after the idle timeout since last_seen_at, or when
-- revoked (logout, password change, disable, admin revoke).
--
-- denied_audited_at, denied_unaudited: refused requests of a session (a
-- role too low), for the audit trail. The first refusal is recorded, then
-- at most one per interval, so that a signed-in account cannot flood the
-- hash-chained trail; the refusals in between are counted here and
-- reported with the next recorded one.
CREATE TABLE switchyard.sessions (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_hash        bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    user_id           bigint NOT NULL REFERENCES switchyard.users (id) ON DELETE CASCADE,
    created_at        timestamptz NOT NULL DEFAULT now(),
    last_seen_at      timestamptz NOT NULL DEFAULT now(),
    expires_at        timestamptz NOT NULL,
    revoked_at        timestamptz,
    remote_addr       text NOT NULL DEFAULT '',
    denied_audited_at timestamptz,
    denied_unaudited  integer NOT NULL DEFAULT 0
);
CREATE INDEX sessions_live_by_user ON switchyard.sessions (user_id) WHERE revoked_at IS NULL;
CREATE INDEX sessions_expires ON switchyard.sessions (expires_at);

-- Failed sign-ins, for throttling across every console instance
-- (internal/auth, throttle.go). Rows older than the throttle window are
-- pruned. client is where the attempt came from: "device:<id>" when the
-- browser showed a valid device cookie for the account, else
-- "addr:<address>". Delays grow per account and client, so an attacker
-- slows only their own attempts; the account-wide and address-wide delays
-- spare browsers with a device cookie.
CREATE TABLE switchyard.login_failures (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account text NOT NULL,
    address text NOT NULL,
    at      timestamptz NOT NULL DEFAULT now(),
    client  text NOT NULL DEFAULT ''
);
CREATE INDEX login_failures_account ON switchyard.login_failures (account, at);
CREATE INDEX login_failures_address ON switchyard.login_failures (address, at);
CREATE INDEX login_failures_at ON switchyard.login_failures (at);
CREATE INDEX login_failures_client ON switchyard.login_failures (account, client, at);

-- Keys the application signs with that every instance must share (device
-- cookies). Generated here, once, from the server's strong random source
-- (gen_random_uuid: 122 random bits each). Anyone who can read this table
-- can forge device cookies, which only exempt from the account-wide and
-- address-wide sign-in delays, never from the password.
CREATE TABLE switchyard.auth_keys (
    name text PRIMARY KEY,
    key  bytea NOT NULL CHECK (length(key) >= 32)
);
INSERT INTO switchyard.auth_keys (name, key) VALUES ('device', decode(
    replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', '') ||
    replace(gen_random_uuid()::text, '-', ''), 'hex'));

-- +goose Down
DROP TABLE switchyard.auth_keys;
DROP TABLE switchyard.login_failures;
DROP TABLE switchyard.sessions;
DROP TABLE switchyard.users;
