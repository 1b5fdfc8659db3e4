package inbox

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// onceEffect is writeEffect as a Registration.Once statement (test SQL):
// the claim and, for a new event, the effect.
func onceEffect(ctx context.Context, pool *pgxpool.Pool, _ Event, c Claim) (int64, error) {
	var row int64
	err := pool.QueryRow(ctx, `WITH c AS (SELECT switchyard.inbox_claim($1, $2, $3, $4, $5) AS event_row),
		effect AS (INSERT INTO effects (event_id, version) SELECT $2, 0 FROM c WHERE c.event_row > 0)
		SELECT event_row FROM c`, c.Source, c.EventID, c.Headers, c.Payload, c.Slot).Scan(&row)
	return row, err
}

// onceRegistration is writeEffect with onceEffect, counting Handle's calls.
func onceRegistration(handled *atomic.Int64) Registration {
	return Registration{
		Handle: func(ctx context.Context, tx pgx.Tx, ev Event) error {
			handled.Add(1)
			return writeEffect(ctx, tx, ev)
		},
		Once: onceEffect,
	}
}

// A Go handler with Registration.Once receives a new event in one
// statement, and a duplicate in one statement too, counted where the
// claim counts one (the source's counter and the event's own record);
// Handle is not called. An event with an entity version goes through
// Handle, as it must (the statement knows nothing of versions).
func TestOnceReceivesAGoHandlersEventInOneStatement(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	traced, sent := tracedPool(t, pool)
	ctx := context.Background()
	var handled atomic.Int64
	reg := onceRegistration(&handled)

	res, err := receive(ctx, traced, event("evt_1"), reg)
	require.NoError(t, err)
	require.Equal(t, OutcomeProcessed, res.Outcome)
	require.Len(t, sent.take(), 1, "one statement")
	res, err = receive(ctx, traced, event("evt_1"), reg)
	require.NoError(t, err)
	require.Equal(t, OutcomeDuplicate, res.Outcome)
	require.Len(t, sent.take(), 1, "a duplicate: one statement")
	require.Zero(t, handled.Load(), "Handle not called")

	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects WHERE event_id = 'evt_1'`), "applied once")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.inbox_events
		WHERE event_id = 'evt_1' AND status = 'processed' AND processed_at IS NOT NULL AND entity_key = ''
		AND headers->>'webhook-id' = 'evt_1' AND payload->>'n' = '1'`), "recorded with its headers and payload")
	require.Equal(t, 1, count(t, pool, `SELECT coalesce(sum(count), 0)::int FROM switchyard.inbox_duplicates WHERE source = 'test'`))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_duplicates WHERE event_id = 'evt_1'`))

	versioned := event("evt_2")
	versioned.EntityKey, versioned.EntityVersion = "order/1", 1
	res, err = receive(ctx, traced, versioned, reg)
	require.NoError(t, err)
	require.Equal(t, OutcomeProcessed, res.Outcome)
	require.Equal(t, int64(1), handled.Load(), "an event with an entity version: Handle")
	require.Greater(t, len(sent.take()), 1, "through the general path")
}

// A Once statement that fails writes nothing, and the event goes down
// Handle's path, which records the handler's failure as for any handler;
// the redelivery's statement takes the failed event again, its failed
// attempt kept.
func TestOnceFailingFallsBackToHandleAndIsRetried(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	var onceCalls, handled atomic.Int64
	failing := Registration{
		Handle: func(context.Context, pgx.Tx, Event) error { handled.Add(1); return errors.New("customer service down") },
		Once: func(ctx context.Context, pool *pgxpool.Pool, ev Event, c Claim) (int64, error) {
			onceCalls.Add(1)
			var row int64
			err := pool.QueryRow(ctx, `SELECT switchyard.inbox_claim($1, $2, $3, $4, $5) / 0`, c.Source, c.EventID, c.Headers, c.Payload, c.Slot).Scan(&row)
			return row, err
		},
	}
	res, err := receive(ctx, pool, event("evt_1"), failing)
	require.ErrorIs(t, err, ErrHandler)
	require.ErrorContains(t, err, "customer service down")
	require.Equal(t, OutcomeFailed, res.Outcome)
	require.Equal(t, []int64{1, 1}, []int64{onceCalls.Load(), handled.Load()})
	s, attempts := status(t, pool, "test", "evt_1")
	require.Equal(t, []any{"failed", 1}, []any{s, attempts})
	require.Zero(t, count(t, pool, `SELECT coalesce(sum(count), 0)::int FROM switchyard.inbox_duplicates`), "the failed statement counted nothing")

	var onceHandled atomic.Int64
	res, err = receive(ctx, pool, event("evt_1"), onceRegistration(&onceHandled))
	require.NoError(t, err)
	require.Equal(t, OutcomeProcessed, res.Outcome)
	require.Zero(t, onceHandled.Load(), "taken again by the statement")
	s, attempts = status(t, pool, "test", "evt_1")
	require.Equal(t, []any{"processed", 1}, []any{s, attempts}, "the failed attempt kept")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects WHERE event_id = 'evt_1'`))
}

// One event received 50 times at once through Once statements is applied
// once; the other 49 are duplicates, each counted once.
func TestOnceAppliesAnEventOnceUnderConcurrentDeliveries(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	var handled atomic.Int64
	reg := onceRegistration(&handled)
	const n = 50
	got := atOnce(t, n, func() (Result, error) { return receive(ctx, pool, event("evt_1"), reg) })
	require.Equal(t, map[Outcome]int{OutcomeProcessed: 1, OutcomeDuplicate: n - 1}, got)
	require.Zero(t, handled.Load())
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects`))
	require.Equal(t, n-1, count(t, pool, `SELECT coalesce(sum(count), 0)::int FROM switchyard.inbox_duplicates WHERE source = 'test'`))
	require.Equal(t, n-1, count(t, pool, `SELECT count(*) FROM switchyard.inbox_event_duplicates WHERE event_id = 'evt_1'`))
}
