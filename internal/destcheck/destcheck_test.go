package destcheck_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/destcheck"
	"github.com/switchyard/switchyard/internal/destination/jetstream/jstest"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	_, err := pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// verdict is destination's kept verdict; "-" when there is none.
func verdict(t *testing.T, pool *pgxpool.Pool, destination string) string {
	t.Helper()
	var p *string
	err := pool.QueryRow(context.Background(), `SELECT (SELECT problem FROM switchyard.destination_checks WHERE destination = $1)`, destination).Scan(&p)
	require.NoError(t, err)
	if p == nil {
		return "-"
	}
	return *p
}

func configChanges(t *testing.T, pool *pgxpool.Pool, destination string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM switchyard.changes WHERE kind = 'config' AND subject = 'destination/' || $1`, destination).Scan(&n))
	return n
}

// TestRecheckNoticesStreamsCreatedAndDeletedLater: against a real NATS
// server, a JetStream destination without a stream is found failing; a
// stream created later clears it, and its deletion brings the failure
// back. Each change of verdict, and only a change, appends a config
// change for the open pages.
func TestRecheckNoticesStreamsCreatedAndDeletedLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	srv := jstest.New(t)
	cfg := destcheck.Config{NATSURL: srv.URL, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	exec(t, pool, `INSERT INTO switchyard.destinations (name, kind, address) VALUES
		('orders-js', 'jetstream', 'orders'), ('hooks', 'webhook', 'https://hooks.example/')`)

	changed, err := destcheck.Recheck(ctx, pool, cfg)
	require.NoError(t, err)
	require.Equal(t, 1, changed)
	require.True(t, strings.HasPrefix(verdict(t, pool, "orders-js"), "no stream captures orders.>"), verdict(t, pool, "orders-js"))
	require.Equal(t, "-", verdict(t, pool, "hooks"), "a webhook destination has no stream to check")
	require.Equal(t, 1, configChanges(t, pool, "orders-js"))

	changed, err = destcheck.Recheck(ctx, pool, cfg)
	require.NoError(t, err)
	require.Zero(t, changed, "the same verdict again is no change")
	require.Equal(t, 1, configChanges(t, pool, "orders-js"))

	nc, err := nats.Connect(srv.URL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := natsjs.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, natsjs.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: natsjs.MemoryStorage})
	require.NoError(t, err)
	changed, err = destcheck.Recheck(ctx, pool, cfg)
	require.NoError(t, err)
	require.Equal(t, 1, changed)
	require.Empty(t, verdict(t, pool, "orders-js"), "a stream created later is noticed")

	require.NoError(t, js.DeleteStream(ctx, "ORDERS"))
	changed, err = destcheck.Recheck(ctx, pool, cfg)
	require.NoError(t, err)
	require.Equal(t, 1, changed)
	require.True(t, strings.HasPrefix(verdict(t, pool, "orders-js"), "no stream captures orders.>"), "a stream deleted later is noticed")
	require.Equal(t, 3, configChanges(t, pool, "orders-js"))
}

// TestRecheckKeepsTheVerdictOfASaveMeanwhile: an admin who changes the
// address while a recheck runs has the save's own check; the recheck's
// verdict, about the old address, is dropped.
func TestRecheckKeepsTheVerdictOfASaveMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	exec(t, pool, `INSERT INTO switchyard.destinations (name, kind, address) VALUES ('orders-js', 'jetstream', 'orders')`)
	exec(t, pool, `INSERT INTO switchyard.destination_checks (destination, problem) VALUES ('orders-js', '')`)
	cfg := destcheck.Config{Check: func(ctx context.Context, prefix string) string {
		exec(t, pool, `UPDATE switchyard.destinations SET address = 'orders2', updated_at = now() WHERE name = 'orders-js'`)
		return "no stream captures " + prefix + ".>"
	}}
	changed, err := destcheck.Recheck(ctx, pool, cfg)
	require.NoError(t, err)
	require.Zero(t, changed)
	require.Empty(t, verdict(t, pool, "orders-js"))
	require.Zero(t, configChanges(t, pool, "orders-js"))
}

// TestServiceRechecksEveryInterval: the service rechecks by itself, again
// and again, until Stop; Changed is called after a changed verdict.
func TestServiceRechecksEveryInterval(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	exec(t, pool, `INSERT INTO switchyard.destinations (name, kind, address) VALUES ('orders-js', 'jetstream', 'orders')`)
	var problem atomic.Value
	problem.Store("no stream captures orders.>")
	var changes atomic.Int64
	svc := destcheck.New(pool, destcheck.Config{
		Interval: 20 * time.Millisecond,
		Check:    func(context.Context, string) string { return problem.Load().(string) },
		Changed:  func() { changes.Add(1) },
	})
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(svc.Stop)
	testwait.Until(t, 30*time.Second, "the first verdict", func() bool { return verdict(t, pool, "orders-js") == "no stream captures orders.>" })
	testwait.Until(t, 30*time.Second, "Changed after the first verdict", func() bool { return changes.Load() == 1 })
	problem.Store("")
	testwait.Until(t, 30*time.Second, "the stream noticed", func() bool { return verdict(t, pool, "orders-js") == "" })
	testwait.Until(t, 30*time.Second, "Changed after the second verdict", func() bool { return changes.Load() == 2 })
	svc.Stop()
	svc.Stop()
	require.ErrorContains(t, svc.Start(context.Background()), "already started")
}
