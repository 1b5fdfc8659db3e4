-- +goose Up

-- Sign-in throttling by client (internal/auth, throttle.go). A failed
-- sign-in now records the client it came from: "device:<id>" when the
-- browser showed a valid device cookie for the account, else
-- "addr:<address>". Delays grow per account and client, so an attacker
-- slows only their own attempts; the account-wide and address-wide delays
-- spare browsers with a device cookie.
ALTER TABLE switchyard.login_failures ADD COLUMN client text NOT NULL DEFAULT '';
UPDATE switchyard.login_failures SET client = 'addr:' || address;
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
DROP INDEX switchyard.login_failures_client;
ALTER TABLE switchyard.login_failures DROP COLUMN client;
