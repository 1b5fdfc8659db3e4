package migrate_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/migrate"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func newMigrator(t *testing.T, pool *pgxpool.Pool) *migrate.Migrator {
	t.Helper()
	m, err := migrate.New(pool, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m
}

func TestTemplateIsMigratedAndCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	m := newMigrator(t, pool)
	current, err := m.Current(ctx)
	require.NoError(t, err)
	require.True(t, current)
	applied, err := m.Up(ctx)
	require.NoError(t, err)
	require.Zero(t, applied, "a migrated database has nothing pending")
}

func TestDownThenUpRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	m := newMigrator(t, pool)
	status, err := m.Status(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, status)

	require.NoError(t, m.Down(ctx))
	current, err := m.Current(ctx)
	require.NoError(t, err)
	require.False(t, current, "after down the newest migration is pending")

	applied, err := m.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, applied)
	var tables int
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'").Scan(&tables))
	require.Zero(t, tables, "every table lives in the switchyard schema")
}

// Console instances that start at once must not race each other's
// migrations: the advisory lock serialises them and each sees success.
func TestConcurrentUpIsSerialised(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	require.NoError(t, newMigrator(t, pool).Down(ctx))

	const instances = 8
	start := make(chan struct{})
	var wg sync.WaitGroup
	applied := make([]int, instances)
	errs := make([]error, instances)
	for i := range instances {
		// Each instance has its own pool, as separate processes would.
		own, err := pgxpool.New(ctx, pool.Config().ConnString())
		require.NoError(t, err)
		t.Cleanup(own.Close)
		m := newMigrator(t, own)
		wg.Go(func() {
			<-start
			applied[i], errs[i] = m.Up(ctx)
		})
	}
	close(start)
	wg.Wait()
	total := 0
	for i := range instances {
		require.NoError(t, errs[i])
		total += applied[i]
	}
	require.Equal(t, 1, total, "exactly one instance applies the migration")
}
