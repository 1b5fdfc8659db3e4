-- switchyard.login_failures: sign-in throttling. See internal/auth.

-- name: LoginFailureRecord :exec
INSERT INTO switchyard.login_failures (account, address, client) VALUES (@account, @address, @client);

-- name: LoginFailureClear :exec
-- LoginFailureClear forgets the failures of one client on one account
-- (after it signed in): other clients' failures still count.
DELETE FROM switchyard.login_failures WHERE account = @account AND client = @client;

-- name: LoginAttemptLock :exec
-- LoginAttemptLock serialises the sign-in attempts of one key (an account,
-- then a client: always in that order) until the transaction ends, so
-- that concurrent guesses are counted against each other.
SELECT pg_advisory_xact_lock(@key::bigint);

-- name: LoginFailurePrune :execrows
DELETE FROM switchyard.login_failures WHERE at < now() - make_interval(secs => @window_seconds::float8);

-- name: LoginThrottleGet :one
-- LoginThrottleGet reads the recent failures (within the window) that the
-- sign-in delays are computed from, with the latest of each, and the
-- database's clock (a "last" with no failure is the epoch):
--   - pair: of this account from this client (an address or a device);
--   - account: of this account from clients without a device cookie,
--     counting each address at most @address_cap times, so that one
--     address alone cannot slow the account for everybody;
--   - address: from this address without a device cookie, any account.
WITH recent AS (
    SELECT f.account, f.address, f.client, f.at FROM switchyard.login_failures f
    WHERE (f.account = @account::text OR f.address = @address::text)
      AND f.at > now() - make_interval(secs => @window_seconds::float8)
), per_address AS (
    SELECT r.address, count(*) AS n, max(r.at) AS last FROM recent r
    WHERE r.account = @account::text AND r.client LIKE 'addr:%'
    GROUP BY r.address
), by_account AS (
    SELECT coalesce(sum(least(p.n, @address_cap::int)), 0)::int AS failures, max(p.last) AS last
    FROM per_address p
)
SELECT
    coalesce(sum(CASE WHEN r.account = @account::text AND r.client = @client::text THEN 1 END), 0)::int AS pair_failures,
    coalesce(max(CASE WHEN r.account = @account::text AND r.client = @client::text THEN r.at END), 'epoch')::timestamptz AS pair_last,
    (SELECT a.failures FROM by_account a)::int AS account_failures,
    coalesce((SELECT a.last FROM by_account a), 'epoch')::timestamptz AS account_last,
    coalesce(sum(CASE WHEN r.address = @address::text AND r.client LIKE 'addr:%' THEN 1 END), 0)::int AS address_failures,
    coalesce(max(CASE WHEN r.address = @address::text AND r.client LIKE 'addr:%' THEN r.at END), 'epoch')::timestamptz AS address_last,
    now()::timestamptz AS now
FROM recent r;
