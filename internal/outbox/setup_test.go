package outbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// setup returns a pool on a fresh database with the named destinations.
func setup(t *testing.T, destinations ...string) *pgxpool.Pool {
	t.Helper()
	pool := dbtest.New(t)
	addDestinations(t, pool, destinations...)
	return pool
}

// newDispatcher is New, with the claims' pool it may make closed at the
// test's end, whether or not the dispatcher was started (a test may claim
// without starting it): a connection left open would keep the test's
// database from being dropped.
func newDispatcher(t *testing.T, pool *pgxpool.Pool, cfg Config) *Dispatcher {
	t.Helper()
	d := New(pool, cfg)
	t.Cleanup(d.closeClaimPool)
	return d
}

// addDestinations registers the named destinations, with setup's settings.
func addDestinations(t *testing.T, pool *pgxpool.Pool, destinations ...string) {
	t.Helper()
	q := queries.New(pool)
	for _, name := range destinations {
		require.NoError(t, q.DestinationUpsert(context.Background(), queries.DestinationUpsertParams{
			Name: name, Kind: "function", RetryBaseMs: 1000, RetryCapMs: 600000, MaxAttempts: 12,
			TimeoutMs: 10000, Burst: 1, Concurrency: 16, BreakerFailureRatio: 0.5,
			BreakerMinRequests: 10, BreakerOpenMs: 30000,
		}))
	}
}

// enqueue commits msgs in a transaction of their own.
func enqueue(t *testing.T, pool *pgxpool.Pool, msgs ...Message) {
	t.Helper()
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		_, err := Enqueue(context.Background(), tx, msgs...)
		return err
	})
	require.NoError(t, err)
}

// countWhere counts outbox rows matching a condition (test SQL).
func countWhere(t *testing.T, pool *pgxpool.Pool, cond string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM switchyard.outbox WHERE "+cond, args...).Scan(&n))
	return n
}

// inStretchOf is countWhere's condition on the messages leased in a
// stretch of the worker named by its argument ($1): first tries, their
// rows not written (stretch.go).
const inStretchOf = "lease_owner IS NULL AND attempts = 0 AND id IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s WHERE s.owner = $1)"

// countWhereIn is countWhere in a transaction, which sees its own writes.
func countWhereIn(t *testing.T, tx pgx.Tx, cond string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, tx.QueryRow(context.Background(), "SELECT count(*) FROM switchyard.outbox WHERE "+cond, args...).Scan(&n))
	return n
}

// mixedMessages is n messages to alpha, every other one unordered and the
// rest in aggregates "0" to aggregates-1, each aggregate's numbered in
// order ({"n": 0}, {"n": 1}...), as flaky checks them.
func mixedMessages(n, aggregates int) []Message {
	msgs := make([]Message, 0, n)
	for i := range n / 2 {
		msgs = append(msgs, Message{Topic: "t", Destination: "alpha", Payload: fmt.Appendf(nil, `{"n":%d}`, i)},
			Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: fmt.Sprint(i % aggregates),
				Payload: fmt.Appendf(nil, `{"n":%d}`, i/aggregates)})
	}
	return msgs
}

// describeForPreparedClaims has the planner describe the outbox (ANALYZE),
// which must hold planStatisticsFloor rows, and leaves the aggregates'
// table small (VACUUM FULL: the row versions the enqueues' sequence left
// are gone), so that a dispatcher started after it sends its claims as
// prepared statements from its first heartbeat on, on the claims' own
// connections (runClaim), until its tables grow.
//
// VACUUM FULL keeps the row versions that a snapshot still open anywhere
// on the horizon might see, and the tests' databases share one server: in
// a CI run on a cold machine, with the other packages' tests beside it,
// the aggregates' table was still 14 pages after it. So it runs again
// until the table is small, which it is as soon as no snapshot older than
// the enqueue's commit is left.
func describeForPreparedClaims(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `ANALYZE switchyard.outbox`)
	require.NoError(t, err)
	var described bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT reltuples >= $1 FROM pg_class WHERE oid = 'switchyard.outbox'::regclass`,
		planStatisticsFloor).Scan(&described))
	require.True(t, described, "the outbox described")
	testwait.UntilEvery(t, time.Minute, 50*time.Millisecond, "the aggregates' table small", func() bool {
		_, err := pool.Exec(ctx, `VACUUM FULL switchyard.outbox_aggregates`)
		require.NoError(t, err)
		var small bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT pg_relation_size('switchyard.outbox_aggregates') <= $1`,
			smallAggregatesTable).Scan(&small))
		return small
	})
}

// deliverAll starts a dispatcher of four workers, with small claims, that
// delivers alpha's messages to dest, and waits until all of messages are
// delivered.
func deliverAll(t *testing.T, pool *pgxpool.Pool, dest destination.Destination, messages int) {
	t.Helper()
	startDispatcher(t, pool, Config{Workers: 4, BatchSize: 10, AggregateBatch: 2,
		Routes: map[string]Route{"alpha": {Destination: dest}}})
	testwait.Until(t, time.Minute, "every message delivered", func() bool {
		return countWhere(t, pool, "state = 'delivered'") == messages
	})
}
