package advisory

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The derivation is a contract between processes: these values must never
// change. They were computed independently of this code, with Python:
// struct.unpack('>q', hashlib.sha256(ns + b'\0' + key).digest()[:8]).
func TestKeyStable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		namespace, key string
		want           int64
	}{
		{"customer", "cus_123", -2406794995484440172},
		{"customer", "", -677591833738387401},
		{"order", "cus_123", 1097692060730967183},
		{"", "ünïcode ✓", 1295317016431587309},
	} {
		require.Equal(t, tc.want, Key(tc.namespace, tc.key), "%q %q", tc.namespace, tc.key)
	}
	id := uuid.MustParse("0190F5B2-7C3E-7A4B-9C1D-2E3F4A5B6C7D")
	require.Equal(t, Key("customer", "0190f5b2-7c3e-7a4b-9c1d-2e3f4a5b6c7d"), KeyUUID("customer", id))
	require.Equal(t, int64(1076700438173495875), KeyUUID("customer", id))
	require.NotEqual(t, Key("a", "bc"), Key("ab", "c"), "the separator keeps namespace and key apart")
}

// A second transaction waits for the first's lock and, past its timeout,
// gets the retryable error; its lock_timeout is its own again afterwards.
func TestLockTimeoutIsRetryable(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	key := Key("test", "held")
	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx)
	require.NoError(t, Lock(ctx, holder, key, time.Second))

	waiter, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer waiter.Rollback(ctx)
	_, err = waiter.Exec(ctx, `SET LOCAL lock_timeout = '42s'`)
	require.NoError(t, err)
	err = Lock(ctx, waiter, key, 100*time.Millisecond)
	require.ErrorIs(t, err, ErrLockTimeout)
	require.NoError(t, waiter.Rollback(ctx))

	// Another key is free; and after a granted lock the caller's
	// lock_timeout is back.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '42s'`); err != nil {
			return err
		}
		if err := Lock(ctx, tx, Key("test", "free"), 100*time.Millisecond); err != nil {
			return err
		}
		var setting string
		if err := tx.QueryRow(ctx, `SHOW lock_timeout`).Scan(&setting); err != nil {
			return err
		}
		require.Equal(t, "42s", setting)
		return nil
	})
	require.NoError(t, err)

	require.NoError(t, holder.Rollback(ctx))
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return Lock(ctx, tx, key, 100*time.Millisecond) })
	require.NoError(t, err, "released when the holder's transaction ended")
}
