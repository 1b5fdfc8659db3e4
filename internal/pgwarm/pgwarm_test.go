package pgwarm

import (
	"context"
	"net"
	"testing"
	"time"

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
		WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`).Scan(&n))
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

// Open never waits for a connection that another holds: it takes only the
// room the pool has beside them (asked for all three of a pool of three,
// one held, it would wait until its deadline).
func TestOpenTakesOnlyTheRoomLeftBesideConnectionsInUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, dbtest.NewURL(t), 3)
	held, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer held.Release()
	bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, Open(bounded, pool, 3))
	require.EqualValues(t, 3, pool.Stat().TotalConns())
	require.EqualValues(t, 2, pool.Stat().IdleConns(), "the two it opened, given back")
}

// Open waits for a connection no longer than its context: a server that
// never answers is reported as the deadline.
func TestOpenWaitsAtMostItsContext(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() }) // accepted, never answered
		}
	}()
	pool := newPool(t, "postgres://nobody@"+ln.Addr().String()+"/silent", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = Open(ctx, pool, 2)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second, "returned at its deadline, not the server's")
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
