package customer

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/advisory"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/demo/demodb"
	"github.com/switchyard/switchyard/internal/destination/webhook"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/queries"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// setup returns a pool on a fresh database with the demo schema installed.
func setup(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := dbtest.New(t)
	require.NoError(t, demodb.Install(context.Background(), pool))
	return pool
}

// 50 concurrent "create if absent" calls for one customer, each in its own
// transaction, all begun before any is released: exactly one inserts.
// (Without the lock, several of them find no row and insert.)
func TestConcurrentCreateIfAbsentInsertsOnce(t *testing.T) {
	t.Parallel()
	const n = 50
	cfg, err := pgxpool.ParseConfig(dbtest.NewURL(t))
	require.NoError(t, err)
	cfg.MaxConns = n
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ctx := context.Background()
	require.NoError(t, demodb.Install(ctx, pool))
	start := make(chan struct{})
	begun := make(chan error, n) // each transaction reports that it began (or could not)
	var created atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `SELECT 1`) // the transaction holds its connection
				begun <- err
				if err != nil {
					return err
				}
				<-start
				ok, err := Upsert(ctx, tx, Customer{ID: "cus_1", Name: "Ada", Email: fmt.Sprintf("ada%d@example.com", i)}, 30*time.Second)
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
	timeout := time.After(30 * time.Second)
	for range n {
		select {
		case err := <-begun:
			require.NoError(t, err)
		case <-timeout:
			close(start)
			t.Fatal("not every transaction began within 30 s")
		}
	}
	close(start)
	wg.Wait()
	require.Equal(t, int64(1), created.Load())
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchyard_demo.customers WHERE external_id = 'cus_1'`).Scan(&rows))
	require.Equal(t, 1, rows)
}

// Through the inbox: the handler creates, updates, and announces through
// the outbox in the same transaction; the entity version orders events.
func TestRegistrationThroughTheInbox(t *testing.T) {
	t.Parallel()
	pool := setup(t)
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
	require.NoError(t, pool.QueryRow(ctx, `SELECT name FROM switchyard_demo.customers WHERE external_id = 'cus_9'`).Scan(&name))
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

// The lock is the advisory package's: a transaction holding the customer's
// lock makes Upsert give up after its timeout with advisory.ErrLockTimeout
// (retryable), having written nothing; once released, Upsert creates, and
// a second Upsert updates.
func TestUpsertWaitsForTheCustomersLock(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	require.NoError(t, advisory.Lock(ctx, holder, advisory.Key(lockNamespace, "cus_7"), time.Second))

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := Upsert(ctx, tx, Customer{ID: "cus_7", Name: "Ada"}, 50*time.Millisecond)
		return err
	})
	require.ErrorIs(t, err, advisory.ErrLockTimeout)
	require.NoError(t, holder.Rollback(ctx))

	upsert := func(name string) bool {
		var created bool
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			created, err = Upsert(ctx, tx, Customer{ID: "cus_7", Name: name, Email: "ada@example.com"}, time.Second)
			return err
		}))
		return created
	}
	require.True(t, upsert("Ada"), "the first upsert creates")
	require.False(t, upsert("Ada L."), "the second updates")
	var name string
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(name), count(*) FROM switchyard_demo.customers WHERE external_id = 'cus_7'`).Scan(&name, &rows))
	require.Equal(t, "Ada L.", name)
	require.Equal(t, 1, rows)
}

// The same event accepted by two receivers (two console instances) on one
// database, 50 times at once: the customer is written once, one event is
// processed, and the other 49 count as duplicates. (Before the demo left
// the core, cmd/console ran this against two console processes.)
func TestSameEventToTwoReceiversAppliesOnce(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	ctx := context.Background()
	url := dbtest.NewURL(t)
	var receivers []*inbox.Receiver
	var pool *pgxpool.Pool
	for range 2 {
		p, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		t.Cleanup(p.Close)
		pool = p
		verifier, err := inbox.NewVerifier(inbox.SchemeStandardWebhooks, []string{secret}, time.Minute)
		require.NoError(t, err)
		receivers = append(receivers, inbox.NewReceiver(inbox.ReceiverConfig{
			Pool: p, Handlers: inbox.Registry{Name: Registration(Config{})},
			Sources: []inbox.Source{{Name: "crm", Scheme: inbox.SchemeStandardWebhooks, Verifier: verifier, Handler: Name}},
		}))
	}
	require.NoError(t, demodb.Install(ctx, pool))
	body := []byte(`{"customer": {"id": "cus_42", "name": "Ada"}, "version": 1}`)
	now := time.Now()
	sig, err := webhook.Sign(secret, "evt_42", now, body)
	require.NoError(t, err)
	headers := http.Header{}
	headers.Set("webhook-id", "evt_42")
	headers.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	headers.Set("webhook-signature", sig)

	const n = 50
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			_, err := receivers[i%2].Accept(ctx, "crm", headers, body)
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	count := func(query string) int {
		var c int
		require.NoError(t, pool.QueryRow(ctx, query).Scan(&c))
		return c
	}
	require.Equal(t, 1, count(`SELECT count(*) FROM switchyard_demo.customers WHERE external_id = 'cus_42'`))
	require.Equal(t, 1, count(`SELECT count(*) FROM switchyard.inbox_events WHERE status = 'processed'`))
	require.Equal(t, n-1, count(`SELECT sum(count) FROM switchyard.inbox_duplicates WHERE source = 'crm'`))
}
