package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
)

// The server's CPU never falls between two samples, while backends that
// spent CPU end all the time: a backend reaped in the middle of a sample
// must be counted once, in the postmaster's times of reaped children or in
// its own entry, never in neither (the inbox bench once printed a negative
// server CPU in CI, where every package's tests share one server).
func TestClusterCPUNeverFallsWhileBackendsEnd(t *testing.T) {
	pool := dbtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	first, err := sampleClusterCPU(ctx, pool)
	require.NoError(t, err)
	if !first.ok {
		t.Fatal("the test's server runs on this machine: its /proc entries must be readable")
	}

	var wg sync.WaitGroup
	churnErr := make(chan error, 4)
	// Stopped however the test ends: an open connection would keep its
	// database from being dropped.
	stop := func() { cancel(); wg.Wait() }
	defer stop()
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				conn, err := pgx.Connect(ctx, pool.Config().ConnString())
				if err != nil {
					if ctx.Err() == nil {
						churnErr <- err
					}
					return
				}
				// About 20 ms of the backend's CPU, then it ends.
				_, err = conn.Exec(ctx, `SELECT count(*) FROM generate_series(1, 200000)`)
				_ = conn.Close(context.Background())
				if err != nil && ctx.Err() == nil {
					churnErr <- err
					return
				}
			}
		})
	}

	prev := first
	for i := range 200 {
		s, err := sampleClusterCPU(ctx, pool)
		require.NoError(t, err)
		require.True(t, s.ok)
		require.GreaterOrEqual(t, s.total, prev.total, "sample %d: the server's CPU fell", i)
		prev = s
	}
	stop()
	close(churnErr)
	for err := range churnErr {
		require.NoError(t, err, "a backend to end")
	}
	require.Positive(t, prev.since(first), "the backends' CPU is counted")
}

// A backend that spent CPU before the phase counts only what it spends
// within it, whichever of the pool's backends lists the processes at each
// end: here the first sample is taken on the busy backend itself and the
// second on another (a pool hands out whichever is idle), as happened to
// the retained drain, whose history's seeding (minutes of one backend's
// CPU) was read as the drain's.
func TestBenchCPUCountsABackendOnlyForThePhase(t *testing.T) {
	ctx := context.Background()
	url := dbtest.NewURL(t)
	open := func() *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(url)
		require.NoError(t, err)
		cfg.MaxConns = 1
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		return pool
	}
	busy, other := open(), open()
	// A second or two of the busy backend's CPU, before the phase.
	_, err := busy.Exec(ctx, `SELECT count(*) FROM generate_series(1, 20000000)`)
	require.NoError(t, err)
	var pid int
	require.NoError(t, busy.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	before, ok := procCPU(pid)
	require.True(t, ok, "the test's server runs on this machine: its /proc entries must be readable")
	require.Greater(t, before, 300*time.Millisecond, "the busy backend spent CPU before the phase")

	start, err := sampleCPU(ctx, busy)
	require.NoError(t, err)
	end, err := sampleCPU(ctx, other)
	require.NoError(t, err)
	_, postgres := end.since(start)
	require.Less(t, postgres, before/2, "the busy backend's CPU before the phase is not the phase's")
}
