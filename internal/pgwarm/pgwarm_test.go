package pgwarm

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func newPool(t *testing.T, url string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	config, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	config.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// backends is how many sessions the server has open on the test's
// database, other than the one asking.
func backends(t *testing.T, url string) int {
	t.Helper()
	probe := newPool(t, url, 1)
	var n int
	require.NoError(t, probe.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n))
	return n
}

// Open opens what the pool lacks of n connections, at most its size, and
// leaves them idle in the pool, open on the server.
func TestOpenLeavesNConnectionsOpenAndIdle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	pool := newPool(t, url, 5)
	require.NoError(t, Open(ctx, pool, 3))
	require.EqualValues(t, 3, pool.Stat().TotalConns())
	require.EqualValues(t, 3, pool.Stat().IdleConns())
	require.Equal(t, 3, backends(t, url), "open on the server")

	require.NoError(t, Open(ctx, pool, 2), "fewer than it holds: nothing to open")
	require.EqualValues(t, 3, pool.Stat().TotalConns())

	require.NoError(t, Open(ctx, pool, 9), "more than its size: all it may hold")
	require.EqualValues(t, 5, pool.Stat().TotalConns())
	require.EqualValues(t, 5, pool.Stat().IdleConns())
}

// A pool that cannot connect is reported, and Open returns.
func TestOpenReportsAFailedConnection(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	config, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	config.ConnConfig.Database = "no_such_database"
	pool, err := pgxpool.NewWithConfig(context.Background(), config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	err = Open(context.Background(), pool, 2)
	require.ErrorContains(t, err, "no_such_database")
	require.Zero(t, pool.Stat().TotalConns())
}
