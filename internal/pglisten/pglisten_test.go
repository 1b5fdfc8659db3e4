package pglisten_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/pglisten"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/service"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// listenPIDs returns the backends of this test's database that LISTEN.
// A backend's query is its last statement: the LISTEN connection's is one
// of its LISTENs, since it sends nothing else. (The pattern is split so
// that this query's own text, which the pool's connections show, does not
// match it.)
func listenPIDs(t *testing.T, pool *pgxpool.Pool) []int32 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE '%LISTEN' || ' switchyard%' ORDER BY pid`)
	require.NoError(t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	return pids
}

// startShared starts the process's LISTEN connection, and the change feed
// listener and a dispatcher on it, as `console serve` does; the
// dispatcher's only destination reports each delivery on delivered.
func startShared(t *testing.T, pool *pgxpool.Pool, delivered chan<- string) *pglisten.Listener {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	shared := pglisten.New(pool, pglisten.Config{Logger: logger, ReconnectMin: 10 * time.Millisecond})
	require.NoError(t, shared.Start(context.Background()))
	t.Cleanup(shared.Stop)
	feed := changefeed.NewListener(pool, changefeed.Config{Notifications: shared, PollInterval: time.Hour, PruneInterval: -1, Logger: logger})
	require.NoError(t, feed.Start(context.Background()))
	t.Cleanup(feed.Stop)
	require.NoError(t, queries.New(pool).DestinationUpsert(context.Background(), queries.DestinationUpsertParams{
		Name: "sink", Kind: "function", RetryBaseMs: 1000, RetryCapMs: 600000, MaxAttempts: 12,
		TimeoutMs: 10000, Burst: 1, Concurrency: 16, BreakerFailureRatio: 0.5, BreakerMinRequests: 10, BreakerOpenMs: 30000,
	}))
	sink := destination.Func(func(_ context.Context, d destination.Delivery) (destination.Outcome, error) {
		delivered <- d.Topic
		return destination.Outcome{StatusCode: 200}, nil
	})
	d := outbox.New(pool, outbox.Config{
		IdlePoll: time.Hour, Routes: map[string]outbox.Route{"sink": {Destination: sink}},
		Notifications: shared, Logger: logger,
	})
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(d.Stop)
	// The dispatcher's channel made the connection reconnect: wait for
	// the one that listens on both.
	probe := make(chan struct{}, 1)
	defer shared.Subscribe(outbox.WakeChannel, func() {
		select {
		case probe <- struct{}{}:
		default:
		}
	})()
	testwait.For(t, 10*time.Second, "LISTEN on the dispatcher's channel", probe)
	testwait.Until(t, 10*time.Second, "one LISTEN connection", func() bool { return len(listenPIDs(t, pool)) == 1 })
	return shared
}

// enqueueAndNotify commits one message for sink, then wakes the
// dispatchers, as an application does.
func enqueueAndNotify(t *testing.T, pool *pgxpool.Pool, topic string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := outbox.Enqueue(ctx, tx, outbox.Message{Topic: topic, Destination: "sink", Payload: []byte(`{}`)})
		return err
	}))
	require.NoError(t, outbox.Notify(ctx, pool))
}

// The change feed and the dispatcher of one process share one LISTEN
// connection, and each gets the wake-ups of its own channel through it.
func TestOneListenConnectionServesEveryChannel(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	delivered := make(chan string, 1)
	shared := startShared(t, pool, delivered)
	feedWoken := make(chan struct{}, 1)
	defer shared.Subscribe(changefeed.Channel, func() {
		select {
		case feedWoken <- struct{}{}:
		default:
		}
	})()
	testwait.For(t, 10*time.Second, "the change feed's catch-up after LISTEN", feedWoken)

	// The dispatcher's poll is an hour away: only its channel's
	// notification through the shared connection can deliver this.
	enqueueAndNotify(t, pool, "first")
	require.Equal(t, "first", testwait.For(t, 30*time.Second, "the dispatcher to be woken", delivered))
	require.NoError(t, changefeed.Notify(context.Background(), pool))
	testwait.For(t, 10*time.Second, "the change feed to be woken", feedWoken)
	require.Len(t, listenPIDs(t, pool), 1, "one LISTEN connection for the process")
}

// Killing the LISTEN backend loses no wake-up for good: the connection
// comes back (one, again) and the dispatcher is woken through it.
func TestDispatcherIsWokenAgainAfterTheListenBackendIsKilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	delivered := make(chan string, 1)
	startShared(t, pool, delivered)
	enqueueAndNotify(t, pool, "before")
	require.Equal(t, "before", testwait.For(t, 30*time.Second, "the first delivery", delivered))
	before := listenPIDs(t, pool)
	require.Len(t, before, 1, "one LISTEN connection for the process")

	var killed bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", before[0]).Scan(&killed))
	require.True(t, killed)
	testwait.Until(t, 10*time.Second, "one new LISTEN connection", func() bool {
		now := listenPIDs(t, pool)
		return len(now) == 1 && now[0] != before[0]
	})
	enqueueAndNotify(t, pool, "after")
	require.Equal(t, "after", testwait.For(t, 30*time.Second, "the dispatcher to be woken after the reconnect", delivered))
}

// A subscriber that comes after the connection is up is woken at once
// when its channel is already listened on, and a new channel is added to
// the same (reconnected) connection.
func TestSubscribeWhileConnected(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	l := pglisten.New(pool, pglisten.Config{ReconnectMin: 10 * time.Millisecond})
	require.NoError(t, l.Start(context.Background()))
	t.Cleanup(l.Stop)
	poke := func(ch chan struct{}) func() {
		return func() {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	first, second, outboxWoken := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	defer l.Subscribe(changefeed.Channel, poke(first))()
	testwait.For(t, 10*time.Second, "the first subscriber's catch-up", first)
	defer l.Subscribe(changefeed.Channel, poke(second))()
	testwait.For(t, time.Second, "the second subscriber's immediate catch-up", second)
	defer l.Subscribe(outbox.WakeChannel, poke(outboxWoken))()
	testwait.For(t, 10*time.Second, "the new channel's catch-up", outboxWoken)
	require.NoError(t, outbox.Notify(context.Background(), pool))
	testwait.For(t, 10*time.Second, "a notification on the new channel", outboxWoken)
	require.Len(t, listenPIDs(t, pool), 1)
	require.ErrorIs(t, l.Start(context.Background()), service.ErrStarted)
}

// afterLog passes on the "after" of each reconnect log line.
type afterLog struct{ afters chan time.Duration }

func (h afterLog) Enabled(context.Context, slog.Level) bool { return true }
func (h afterLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h afterLog) WithGroup(string) slog.Handler            { return h }
func (h afterLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "after" {
			select {
			case h.afters <- a.Value.Duration():
			default:
			}
		}
		return true
	})
	return nil
}

// Attempts that fail slowly (a connect timing out on a loaded server)
// back off like any other: only a connection that was up for a while
// starts the backoff over. Before, an attempt that took longer than
// ReconnectMax to fail reset it, and a server too slow to answer in time
// got a new attempt every 100 ms.
func TestSlowFailuresBackOff(t *testing.T) {
	t.Parallel()
	afters := make(chan time.Duration, 16)
	l := pglisten.New(nil, pglisten.Config{
		Logger:       slog.New(afterLog{afters: afters}),
		ReconnectMin: 10 * time.Millisecond, ReconnectMax: 40 * time.Millisecond,
		ConnectTimeout: 60 * time.Millisecond, // longer than ReconnectMax
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	})
	l.Subscribe(pglisten.Channel{Name: "nowhere", Listen: func(*queries.Queries, context.Context) error { return nil }}, func() {})
	require.NoError(t, l.Start(context.Background()))
	defer l.Stop()
	var got []time.Duration
	for range 4 {
		got = append(got, testwait.For(t, 30*time.Second, "a reconnect", afters))
	}
	require.Equal(t, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond}, got)
}
