package auth

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// elapse moves the sign-in throttle's clock forward by d: every recorded
// failure becomes d older, which is all the throttle reads of time.
func elapse(t *testing.T, pool *pgxpool.Pool, d time.Duration) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `UPDATE switchyard.login_failures SET at = at - make_interval(secs => $1)`, d.Seconds())
	require.NoError(t, err)
}

func throttled(t *testing.T, err error) time.Duration {
	t.Helper()
	var te *ThrottledError
	require.ErrorAs(t, err, &te)
	return te.RetryAfter
}

// Fifty failures from one address slow that address, not the account's
// owner: they sign in from another address, and from the attacker's own
// address with the device cookie of an earlier sign-in. The owner's
// success does not clear the attacker's failures.
func TestAttackerFromOneAddressDoesNotLockOutTheOwner(t *testing.T) {
	t.Parallel()
	svc, pool := setup(t, Config{ThrottleWindow: time.Hour, BaseDelay: time.Minute})
	ctx := context.Background()
	const attacker, owner = "192.0.2.1", "198.51.100.7"
	earlier, err := svc.SignIn(ctx, Attempt{Name: "alice", Password: goodPassword, Addr: owner})
	require.NoError(t, err)
	require.NotEmpty(t, earlier.Device)
	bobs, err := svc.SignIn(ctx, Attempt{Name: "bob", Password: goodPassword, Addr: owner})
	require.NoError(t, err)

	for range 5 {
		_, err := svc.Login(ctx, "alice", "wrong password!", attacker)
		require.ErrorIs(t, err, ErrInvalidCredentials)
	}
	throttled(t, func() error { _, err := svc.Login(ctx, "alice", "wrong password!", attacker); return err }())
	// The attacker waits out each delay for 45 more failures.
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.login_failures (account, address, client)
		SELECT 'alice', $1, 'addr:' || $1 FROM generate_series(1, 45)`, attacker)
	require.NoError(t, err)
	_, err = svc.Login(ctx, "alice", goodPassword, attacker)
	require.Greater(t, throttled(t, err), 14*time.Minute, "the attacker's delay has grown to the maximum")

	_, err = svc.Login(ctx, "alice", goodPassword, "203.0.113.9")
	require.NoError(t, err, "the owner signs in from another address")
	_, err = svc.SignIn(ctx, Attempt{Name: "alice", Password: goodPassword, Addr: attacker, Device: earlier.Device})
	require.NoError(t, err, "the owner signs in from the attacker's address with their device cookie")

	for name, device := range map[string]string{
		"no cookie":           "",
		"a tampered cookie":   earlier.Device[:len(earlier.Device)-2] + "xx",
		"bob's cookie":        bobs.Device,
		"a cookie of garbage": "1.2.3",
	} {
		_, err := svc.SignIn(ctx, Attempt{Name: "alice", Password: goodPassword, Addr: attacker, Device: device})
		throttled(t, err)
		require.NotEmpty(t, name)
	}
}

// Failures of one account from many addresses slow every browser without
// a device cookie for it, and none with one.
func TestAccountWideDelaySparesBrowsersThatSignedInBefore(t *testing.T) {
	t.Parallel()
	svc, pool := setup(t, Config{ThrottleWindow: time.Hour, FreeFailures: 2, AccountFreeFailures: 6, BaseDelay: time.Hour})
	ctx := context.Background()
	earlier, err := svc.SignIn(ctx, Attempt{Name: "alice", Password: goodPassword, Addr: "198.51.100.7"})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.login_failures (account, address, client)
		SELECT 'alice', '192.0.2.' || a, 'addr:192.0.2.' || a FROM generate_series(1, 3) a, generate_series(1, 10)`)
	require.NoError(t, err)
	_, err = svc.Login(ctx, "alice", goodPassword, "203.0.113.9")
	throttled(t, err)
	_, err = svc.Login(ctx, "bob", goodPassword, "203.0.113.9")
	require.NoError(t, err, "another account is not slowed")
	_, err = svc.SignIn(ctx, Attempt{Name: "alice", Password: goodPassword, Addr: "203.0.113.9", Device: earlier.Device})
	require.NoError(t, err)

	old := Config{ThrottleWindow: time.Hour, FreeFailures: 2, AccountFreeFailures: 6, BaseDelay: time.Hour, DeviceLifetime: time.Hour,
		Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}
	later := New(pool, old)
	_, err = later.SignIn(ctx, Attempt{Name: "alice", Password: goodPassword, Addr: "203.0.113.9", Device: earlier.Device})
	throttled(t, err) // an expired device cookie counts for nothing
}

// Retry-After tells the truth: an attempt two minutes earlier is refused
// (and does not push the time back), one at that time is admitted; each failure past the free ones doubles
// the delay. The delays are minutes so that the real seconds a loaded
// machine spends hashing passwords between two attempts do not matter.
func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	svc, pool := setup(t, Config{ThrottleWindow: 24 * time.Hour, FreeFailures: 3, BaseDelay: 10 * time.Minute, MaxDelay: time.Hour})
	ctx := context.Background()
	const addr = "192.0.2.5"
	fail := func() {
		t.Helper()
		_, err := svc.Login(ctx, "alice", "wrong password!", addr)
		require.ErrorIs(t, err, ErrInvalidCredentials)
	}
	for range 3 {
		fail()
	}
	_, err := svc.Login(ctx, "alice", goodPassword, addr)
	wait := throttled(t, err)
	require.Greater(t, wait, 5*time.Minute)
	require.LessOrEqual(t, wait, 10*time.Minute)
	elapse(t, pool, wait-2*time.Minute)
	_, err = svc.Login(ctx, "alice", goodPassword, addr)
	require.LessOrEqual(t, throttled(t, err), 2*time.Minute, "refused attempts do not count: the promise holds")
	elapse(t, pool, 2*time.Minute)
	fail()
	_, err = svc.Login(ctx, "alice", goodPassword, addr)
	wait = throttled(t, err)
	require.Greater(t, wait, 15*time.Minute, "the next failure doubles the delay")
	require.LessOrEqual(t, wait, 20*time.Minute)
	elapse(t, pool, wait)
	_, err = svc.Login(ctx, "alice", goodPassword, addr)
	require.NoError(t, err, "the retry at Retry-After is admitted")
	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM switchyard.login_failures WHERE client = 'addr:' || $1::text`, addr),
		"a success clears its client's failures")
}
