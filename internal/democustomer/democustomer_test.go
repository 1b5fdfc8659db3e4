package democustomer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/queries"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// 50 concurrent "create if absent" calls for one customer, each in its own
// transaction: exactly one inserts.
func TestConcurrentCreateIfAbsentInsertsOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	const n = 50
	start := make(chan struct{})
	var created atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
				ok, err := Upsert(context.Background(), tx, Customer{ID: "cus_1", Name: "Ada", Email: string(rune('a'+i%26)) + "@example.com"}, 0)
				if ok {
					created.Add(1)
				}
				return err
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	require.Equal(t, int64(1), created.Load())
	var rows int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM switchyard.demo_customers WHERE external_id = 'cus_1'`).Scan(&rows))
	require.Equal(t, 1, rows)
}

// Through the inbox: the handler creates, updates, and announces through
// the outbox in the same transaction; the entity version orders events.
func TestRegistrationThroughTheInbox(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	require.NoError(t, queries.New(pool).DestinationUpsert(ctx, queries.DestinationUpsertParams{
		Name: "crm", Kind: "function", RetryBaseMs: 1000, RetryCapMs: 600000, MaxAttempts: 12,
		TimeoutMs: 10000, Burst: 1, Concurrency: 16, BreakerFailureRatio: 0.5, BreakerMinRequests: 10, BreakerOpenMs: 30000,
	}))
	reg := Registration(Config{Destination: "crm"})
	receive := func(id, body string) inbox.Outcome {
		key, version, err := reg.Entity([]byte(body))
		require.NoError(t, err)
		res, err := inbox.Receive(ctx, pool, inbox.Event{Source: "crm-in", ID: id, Payload: []byte(body), EntityKey: key, EntityVersion: version}, reg.Handle)
		require.NoError(t, err)
		return res.Outcome
	}
	require.Equal(t, inbox.OutcomeProcessed, receive("e1", `{"customer":{"id":"cus_9","name":"Ada"},"version":1}`))
	require.Equal(t, inbox.OutcomeProcessed, receive("e3", `{"customer":{"id":"cus_9","name":"Ada L."},"version":3}`))
	require.Equal(t, inbox.OutcomeStale, receive("e2", `{"customer":{"id":"cus_9","name":"Old"},"version":2}`))
	var name string
	require.NoError(t, pool.QueryRow(ctx, `SELECT name FROM switchyard.demo_customers WHERE external_id = 'cus_9'`).Scan(&name))
	require.Equal(t, "Ada L.", name)
	var topics []string
	rows, err := pool.Query(ctx, `SELECT topic FROM switchyard.outbox ORDER BY id`)
	require.NoError(t, err)
	topics, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"customer.created", "customer.updated"}, topics)

	_, _, err = reg.Entity([]byte(`{"customer":{}}`))
	require.Error(t, err, "an event without a customer id is malformed")
}
