package cli

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/reconcile"
	"github.com/switchyard/switchyard/internal/reconcile/fakeremote"
	"github.com/switchyard/switchyard/internal/testlog"
	"github.com/switchyard/switchyard/internal/testwait"
)

// console serve runs the reconciler; kill -9 of it in the middle of a
// cycle loses nothing: once its lease expires another runner resumes the
// cycle from the persisted cursor, and the cycle examines every row
// exactly once and finds exactly the drift.
func TestReconcileCycleSurvivesKill9OfTheConsole(t *testing.T) {
	t.Parallel()
	const rows = 2000
	ctx := context.Background()
	url := dbtest.NewURL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	remote := fakeremote.New()
	defer remote.Close()
	_, err = pool.Exec(ctx, `CREATE TABLE public.orders (id bigint PRIMARY KEY, total integer NOT NULL);
		INSERT INTO public.orders SELECT g, g FROM generate_series(1, 2000) g;
		INSERT INTO switchyard.destinations (name, kind) VALUES ('shop', 'function')`)
	require.NoError(t, err)
	for i := 1; i <= rows; i++ {
		if i%700 != 0 {
			remote.Put(strconv.Itoa(i), map[string]any{"total": i})
		}
	}
	_, err = queries.New(pool).ReconcileCheckInsert(ctx, queries.ReconcileCheckInsertParams{
		Name: "orders", Kind: reconcile.KindTable, BatchSize: 20, RemoteRate: 50, TimeoutMs: 2000, IntervalMs: 3600000,
		RemoteUrl: remote.URL(), Destination: "shop", WindowMs: 1, TableSchema: "public", TableName: "orders",
		KeyColumn: "id", Columns: []string{"total"}, LeaseMs: 1500,
	})
	require.NoError(t, err)
	midway := make(chan struct{})
	var once sync.Once
	remote.OnCall(func(n int64) {
		if n == 10 {
			once.Do(func() { close(midway) })
		}
	})

	console := serveConsole(t, []string{"DATABASE_URL=" + url, "SWITCHYARD_WORKERS=0"})
	select {
	case <-midway:
	case <-time.After(time.Minute):
		t.Fatalf("the console's reconciler made no calls: %s", console.Stderr())
	}
	console.Signal(t, syscall.SIGKILL)
	console.WaitExit(t, 10*time.Second)
	var cycle, examined int64
	var state string
	require.NoError(t, pool.QueryRow(ctx, "SELECT id, state, examined FROM switchyard.reconcile_cycles").Scan(&cycle, &state, &examined))
	require.Equal(t, "running", state, "killed in the middle of the cycle")
	require.Less(t, examined, int64(rows))

	client := &http.Client{}
	defer client.CloseIdleConnections()
	runner := reconcile.NewRunner(pool, reconcile.Config{Owner: "survivor", Client: client, Logger: testlog.New(t)})
	testwait.Until(t, 30*time.Second, "the killed console's lease to expire", func() bool {
		ran, err := runner.RunOnce(ctx)
		require.NoError(t, err)
		return ran
	})
	var runs int32
	var found int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT id, state, examined, runs, missing_remote FROM switchyard.reconcile_cycles").
		Scan(&cycle, &state, &examined, &runs, &found))
	require.Equal(t, "complete", state)
	require.Equal(t, int32(2), runs, "one cycle, resumed")
	require.Equal(t, int64(rows), examined, "every row examined exactly once")
	require.Equal(t, int64(2), found)
}
