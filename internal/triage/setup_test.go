package triage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// setup returns a pool on a fresh database with destination "d".
func setup(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := dbtest.New(t)
	require.NoError(t, queries.New(pool).DestinationUpsert(context.Background(), queries.DestinationUpsertParams{
		Name: "d", Kind: "function", RetryBaseMs: 1000, RetryCapMs: 600000, MaxAttempts: 12,
		TimeoutMs: 10000, Burst: 1, Concurrency: 16, BreakerFailureRatio: 0.5,
		BreakerMinRequests: 10, BreakerOpenMs: 30000,
	}))
	return pool
}

// account creates an account with role and returns its principal (test
// SQL: the password is never used, so argon2 is not worth its time).
func account(t *testing.T, pool *pgxpool.Pool, name string, role auth.Role) auth.Principal {
	t.Helper()
	var id int64
	err := pool.QueryRow(context.Background(),
		"INSERT INTO switchyard.users (name, role, password_hash) VALUES ($1, $2, 'unused') RETURNING id", name, role.String()).Scan(&id)
	require.NoError(t, err)
	return auth.Principal{UserID: id, Name: name, Role: role}
}

// refusing rejects every delivery permanently with one error text, so
// every message it gets goes dead with one fingerprint.
type refusing struct{}

func (refusing) Deliver(context.Context, destination.Delivery) (destination.Outcome, error) {
	return destination.Outcome{StatusCode: 422}, destination.Permanent(errors.New("HTTP 422: order rejected"))
}

// killDead enqueues msgs to "d" and runs a real dispatcher until `dead`
// messages are dead: the triggers under test fire in its finalize.
func killDead(t *testing.T, pool *pgxpool.Pool, dead int, msgs ...outbox.Message) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := outbox.Enqueue(ctx, tx, msgs...)
		return err
	}))
	d := outbox.New(pool, outbox.Config{Workers: 1, Routes: map[string]outbox.Route{"d": {Destination: refusing{}}}})
	require.NoError(t, d.Start(ctx))
	defer d.Stop()
	testwait.Until(t, time.Minute, fmt.Sprintf("%d dead messages", dead), func() bool {
		return count(t, pool, "SELECT count(*) FROM switchyard.outbox WHERE state = 'dead'") >= dead
	})
}

func message(aggregate string) outbox.Message {
	m := outbox.Message{Topic: "order.created", Destination: "d", AggregateID: aggregate, Payload: []byte(`{}`)}
	if aggregate != "" {
		m.AggregateType = "order"
	}
	return m
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// onlyItem returns the one item of kind.
func onlyItem(t *testing.T, pool *pgxpool.Pool, kind Kind) Item {
	t.Helper()
	items, err := List(context.Background(), pool, Filter{Kind: kind})
	require.NoError(t, err)
	require.Len(t, items, 1)
	return items[0]
}

// testClock is a database clock that a test moves by hand (Engine.Now):
// it starts at the server's now().
type testClock struct {
	mu sync.Mutex
	at time.Time // guarded by mu
}

func newClock(t *testing.T, pool *pgxpool.Pool) *testClock {
	t.Helper()
	c := &testClock{}
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT now()").Scan(&c.at))
	return c
}

func (c *testClock) now() *time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := c.at
	return &at
}

func (c *testClock) move(d time.Duration) {
	c.mu.Lock()
	c.at = c.at.Add(d)
	c.mu.Unlock()
}
