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
CREATE TABLE switchyard.sessions (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_hash   bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    user_id      bigint NOT NULL REFERENCES switchyard.users (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz,
    remote_addr  text NOT NULL DEFAULT ''
);
CREATE INDEX sessions_live_by_user ON switchyard.sessions (user_id) WHERE revoked_at IS NULL;
CREATE INDEX sessions_expires ON switchyard.sessions (expires_at);

-- Failed sign-ins, for throttling per account and per address across every
-- console instance. Rows older than the throttle window are pruned.
CREATE TABLE switchyard.login_failures (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account text NOT NULL,
    address text NOT NULL,
    at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_account ON switchyard.login_failures (account, at);
CREATE INDEX login_failures_address ON switchyard.login_failures (address, at);
CREATE INDEX login_failures_at ON switchyard.login_failures (at);

-- +goose Down
DROP TABLE switchyard.login_failures;
DROP TABLE switchyard.sessions;
DROP TABLE switchyard.users;
