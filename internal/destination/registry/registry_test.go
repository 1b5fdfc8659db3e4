package registry

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// A misconfigured destination (a bad URL, a missing secret, a refused
// port, a host that never answers) sends only its own messages to dead
// after their attempts, and never holds up a healthy destination: every
// healthy message is delivered while the hanging destination's first
// attempts are still waiting for their timeout.
func TestMisconfiguredDestinationsFailOnlyTheirOwnMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)

	var good atomic.Int64
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		good.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(healthy.Close)
	refused := closedPort(t)
	hanging := silentListener(t)

	// Long enough that the healthy destination's few deliveries surely
	// finish within the hanging one's first attempts, even on a busy
	// machine; few enough misconfigured messages that their three attempts
	// each still end soon.
	const timeoutMs = 5000
	for _, d := range []struct{ name, address, secretRef string }{
		{"healthy", healthy.URL, "TEST_SECRET"},
		{"bad-url", "http://[::1", "TEST_SECRET"},
		{"no-secret", healthy.URL, "TEST_UNSET_SECRET"},
		{"refused", "http://" + refused, "TEST_SECRET"},
		{"hanging", "http://" + hanging, "TEST_SECRET"},
	} {
		_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations
			(name, kind, address, secret_ref, retry_base_ms, retry_cap_ms, max_attempts, timeout_ms, breaker_min_requests)
			VALUES ($1, 'webhook', $2, $3, 1, 5, 3, $4, 1000)`, d.name, d.address, d.secretRef, timeoutMs)
		require.NoError(t, err)
	}
	const healthyMessages, perDestination = 40, 8
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	var msgs []outbox.Message
	for _, dest := range []string{"healthy", "bad-url", "no-secret", "refused", "hanging"} {
		n := perDestination
		if dest == "healthy" {
			n = healthyMessages
		}
		for i := range n {
			msgs = append(msgs, outbox.Message{Topic: "t", Destination: dest, Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
		}
	}
	_, err = outbox.Enqueue(ctx, tx, msgs...)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	getenv := func(name string) string {
		if name == "TEST_SECRET" {
			return testSecret
		}
		return ""
	}
	metrics := outbox.NewMetrics(nil)
	set := New(pool, Config{Owner: "routes-test", Metrics: metrics, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Getenv: getenv})
	t.Cleanup(set.Close)
	routes, _, err := set.Sync(ctx)
	require.NoError(t, err)
	d := outbox.New(pool, outbox.Config{Routes: routes, Workers: 2, BatchSize: 20, IdlePoll: 10 * time.Millisecond, Metrics: metrics})
	require.NoError(t, d.Start(ctx))
	t.Cleanup(d.Stop)

	testwait.Until(t, 60*time.Second, "every healthy message delivered", func() bool {
		return count(t, pool, `destination = 'healthy' AND state = 'delivered'`) == healthyMessages
	})
	require.Zero(t, count(t, pool, `destination = 'hanging' AND attempts > 1`),
		"the healthy destination finished while the hanging one was still on its first attempts")
	require.Equal(t, int64(healthyMessages), good.Load(), "one request per healthy message")

	testwait.Until(t, 120*time.Second, "every misconfigured message dead", func() bool {
		return count(t, pool, `destination <> 'healthy' AND state = 'dead'`) == 4*perDestination
	})
	require.Equal(t, 4*perDestination, count(t, pool, `destination <> 'healthy' AND state = 'dead' AND attempts = 3`),
		"each after all its attempts")
}

func count(t *testing.T, pool *pgxpool.Pool, where string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM switchyard.outbox WHERE `+where, args...).Scan(&n))
	return n
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// silentListener accepts connections and never answers: a host that hangs.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// A registry follows switchyard.destinations: an added destination gets a
// route, a changed one a new route, a removed one loses it, and an
// unchanged one keeps its route (and so its breaker's state).
func TestRegistryFollowsTheDestinationsTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	upsert := func(name, address string) {
		_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address, secret_ref) VALUES ($1, 'webhook', $2, 'TEST_SECRET')
			ON CONFLICT (name) DO UPDATE SET address = EXCLUDED.address, updated_at = now()`, name, address)
		require.NoError(t, err)
	}
	upsert("kept", "http://127.0.0.1:1/kept")
	upsert("changed", "http://127.0.0.1:1/before")
	upsert("removed", "http://127.0.0.1:1/removed")
	set := New(pool, Config{Owner: "routes-test", Getenv: func(string) string { return testSecret }})
	t.Cleanup(set.Close)

	first, changed, err := set.Sync(ctx)
	require.NoError(t, err)
	require.True(t, changed)
	require.Len(t, first, 3)
	again, changed, err := set.Sync(ctx)
	require.NoError(t, err)
	require.False(t, changed, "nothing changed")
	require.Same(t, first["kept"].Guard, again["kept"].Guard)

	upsert("changed", "http://127.0.0.1:1/after")
	upsert("added", "http://127.0.0.1:1/added")
	_, err = pool.Exec(ctx, `DELETE FROM switchyard.destinations WHERE name = 'removed'`)
	require.NoError(t, err)
	next, changed, err := set.Sync(ctx)
	require.NoError(t, err)
	require.True(t, changed)
	require.ElementsMatch(t, []string{"kept", "changed", "added"}, slices.Collect(maps.Keys(next)))
	require.Same(t, first["kept"].Guard, next["kept"].Guard, "an unchanged destination keeps its breaker")
	require.NotSame(t, first["changed"].Guard, next["changed"].Guard, "a changed one is rebuilt")
}

// Watch hands the dispatcher a destination added to the table within one
// interval, without a restart.
func TestWatchAppliesAnAddedDestination(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	pool := dbtest.New(t)
	set := New(pool, Config{Owner: "routes-test", Interval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	first, _, err := set.Sync(ctx)
	require.NoError(t, err)
	require.Empty(t, first)
	applied := make(chan map[string]outbox.Route, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		set.Watch(ctx, func(r map[string]outbox.Route) { applied <- r })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		set.Close()
	})
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address) VALUES ('added', 'webhook', 'http://127.0.0.1:1/')`)
	require.NoError(t, err)
	select {
	case routes := <-applied:
		require.Contains(t, routes, "added")
	case <-time.After(30 * time.Second):
		t.Fatal("the added destination was not applied")
	}
}
