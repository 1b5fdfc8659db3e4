package outbox

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/queries"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// setup returns a pool on a fresh database with the named destinations.
func setup(t *testing.T, destinations ...string) *pgxpool.Pool {
	t.Helper()
	pool := dbtest.New(t)
	addDestinations(t, pool, destinations...)
	return pool
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

// countWhereIn is countWhere in a transaction, which sees its own writes.
func countWhereIn(t *testing.T, tx pgx.Tx, cond string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, tx.QueryRow(context.Background(), "SELECT count(*) FROM switchyard.outbox WHERE "+cond, args...).Scan(&n))
	return n
}
