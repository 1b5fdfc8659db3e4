package chaos

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/pgembed"
	"github.com/switchyard/switchyard/internal/postgres"
	"github.com/switchyard/switchyard/internal/testlog"
	"github.com/switchyard/switchyard/internal/testwait"
)

// The terminate fault kills the run's own sessions only: with
// DATABASE_URL the database may hold other applications' sessions (a
// service, someone's psql), which are not the run's to kill.
func TestTerminateFaultKillsOnlyTheRunsOwnSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, err := pgembed.MkdirTemp("chaos-terminate-")
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, os.RemoveAll(dir)) })
	c, err := pgembed.Start(ctx, pgembed.Config{DataDir: filepath.Join(dir, "pg"), Logger: testlog.New(t), Throwaway: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop() })
	db := &database{cluster: c}
	direct, err := db.directURL()
	require.NoError(t, err)
	db.admin = openPool(t, direct, adminApp)

	bystanderPID := backendPID(t, openPool(t, direct, "someone-elses-service"))
	consolePID := backendPID(t, openPool(t, direct, postgres.DefaultApplicationName))
	enqueuerPID := backendPID(t, openPool(t, direct, enqueuerApp))

	in := &injector{db: db}
	require.NoError(t, in.terminate(ctx, 5)) // up to six backends
	alive := func(pid int32) bool {
		var n int
		require.NoError(t, db.admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n))
		return n == 1
	}
	testwait.Until(t, 30*time.Second, "the run's own backends ended", func() bool {
		return !alive(consolePID) && !alive(enqueuerPID)
	})
	require.True(t, alive(bystanderPID), "another application's backend was terminated")
}

func openPool(t *testing.T, url, app string) *pgxpool.Pool {
	t.Helper()
	pool, err := connect(context.Background(), url, app)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// backendPID opens one connection of pool (kept idle in the pool) and
// returns its server process id.
func backendPID(t *testing.T, pool *pgxpool.Pool) int32 {
	t.Helper()
	var pid int32
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid))
	return pid
}
