package dbtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/testwait"
)

// Each test database after the first is cloned and dropped over the
// admin connections the test binary keeps, not over new ones: a server
// backend costs the shared test server about 45 ms of CPU to start and
// stop. The clones are pgtestdb's: migrated, owned by its role, dropped
// when their test passes.
func TestClonesReuseTheAdminConnections(t *testing.T) {
	privateTMPDIR(t)
	cluster, err := StartCluster(context.Background())
	require.NoError(t, err)
	t.Cleanup(cluster.Stop)
	conf, err := configFromURL(cluster.URL)
	require.NoError(t, err)
	saved := server
	server = conf
	t.Cleanup(func() { server = saved })
	var c cloner
	t.Cleanup(c.close)

	ctx := context.Background()
	admin, err := pgx.Connect(ctx, cluster.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(ctx) })
	sessions := func() (n int64) {
		require.NoError(t, admin.QueryRow(ctx, `SELECT sessions FROM pg_stat_database WHERE datname = current_database()`).Scan(&n))
		return n
	}
	before := sessions()

	const clones = 6
	var names []string
	for i := range clones {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			url := c.newURL(t)
			db, err := pgx.Connect(ctx, url)
			require.NoError(t, err)
			defer db.Close(ctx)
			var name, owner string
			var migrations int
			require.NoError(t, db.QueryRow(ctx, `SELECT current_database(), pg_get_userbyid(d.datdba),
				(SELECT count(*) FROM switchyard.goose_db_version)
				FROM pg_database d WHERE d.datname = current_database()`).Scan(&name, &owner, &migrations))
			require.Equal(t, "pgtdbuser", owner)
			require.Positive(t, migrations)
			names = append(names, name)
		})
	}
	var left int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = ANY($1)`, names).Scan(&left))
	require.Zero(t, left, "the databases of passing tests are dropped")

	// The first clone is pgtestdb's (a session to create it, one to drop
	// it); the pool's sessions end when it closes. Once those are counted,
	// the others would be too: each clone's own session ended earlier.
	pooled := c.admin.Stat().NewConnsCount()
	c.close()
	testwait.Until(t, 10*time.Second, "the sessions counted", func() bool { return sessions()-before >= 2+pooled })
	require.Less(t, sessions()-before, int64(clones), "sessions to the server's database for %d clones", clones)
}
