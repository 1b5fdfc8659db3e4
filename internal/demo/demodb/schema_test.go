package demodb

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// A migrated database carries no demo object, in the core schema or its
// own; Install creates the demo schema, also when several instances
// install at once, and again over an installed one; Uninstall removes it.
func TestInstallIsIdempotentAndLeavesTheCoreAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	var demoObjects int
	require.NoError(t, pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname = 'switchyard' AND c.relname LIKE 'demo\_%') +
		(SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		 WHERE n.nspname = 'switchyard' AND p.proname LIKE 'demo\_%')`).Scan(&demoObjects))
	require.Zero(t, demoObjects, "the core migrations leave no demo object in switchyard")
	installed, err := Installed(ctx, pool)
	require.NoError(t, err)
	require.False(t, installed, "only the demo creates its schema")

	const n = 4
	errs := make(chan error, n)
	testwait.Together(n, func(int) {
		errs <- Install(ctx, pool)
	})
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, Install(ctx, pool), "installing again changes nothing")
	created, err := New(pool).CustomerUpsert(ctx, CustomerUpsertParams{LockKey: 1, TimeoutMs: 1000, ExternalID: "cus_1", Name: "Ada"})
	require.NoError(t, err)
	require.True(t, created)
	installed, err = Installed(ctx, pool)
	require.NoError(t, err)
	require.True(t, installed)

	require.NoError(t, Uninstall(ctx, pool))
	installed, err = Installed(ctx, pool)
	require.NoError(t, err)
	require.False(t, installed)
}
