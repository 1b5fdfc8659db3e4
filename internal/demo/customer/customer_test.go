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
	"github.com/switchyard/switchyard/internal/pgtrace"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/testwait"
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
// processed, and the other 49 count as duplicates. So for an event with a
// version (through Handle) and one without (in one statement:
// CustomerEventOnce). (Before the demo left the core, cmd/console ran this
// against two console processes.)
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
	count := func(query string, args ...any) int {
		var c int
		require.NoError(t, pool.QueryRow(ctx, query, args...).Scan(&c))
		return c
	}
	const n = 50
	for id, customer := range map[string]string{"evt_42": "cus_42", "evt_43": "cus_43"} {
		body := fmt.Appendf(nil, `{"customer": {"id": %q, "name": "Ada"}, "version": 1}`, customer)
		if id == "evt_43" {
			body = fmt.Appendf(nil, `{"customer": {"id": %q, "name": "Ada"}}`, customer)
		}
		headers := signed(t, secret, id, body)
		errs := make(chan error, n)
		testwait.Together(n, func(i int) {
			_, err := receivers[i%2].Accept(ctx, "crm", headers, body)
			errs <- err
		})
		close(errs)
		for err := range errs {
			require.NoError(t, err, id)
		}
		require.Equal(t, 1, count(`SELECT count(*) FROM switchyard_demo.customers WHERE external_id = $1`, customer), id)
		require.Equal(t, 1, count(`SELECT count(*) FROM switchyard.inbox_events WHERE status = 'processed' AND event_id = $1`, id), id)
		require.Equal(t, n-1, count(`SELECT count(*) FROM switchyard.inbox_event_duplicates WHERE event_id = $1`, id), id)
	}
	require.Equal(t, 2*(n-1), count(`SELECT sum(count) FROM switchyard.inbox_duplicates WHERE source = 'crm'`))
}

// signed is the Standard Webhooks headers of a request carrying body.
func signed(t *testing.T, secret, id string, body []byte) http.Header {
	t.Helper()
	now := time.Now()
	sig, err := webhook.Sign(secret, id, now, body)
	require.NoError(t, err)
	headers := http.Header{}
	headers.Set("webhook-id", id)
	headers.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	headers.Set("webhook-signature", sig)
	return headers
}

// Without a destination, an event without a version costs one statement
// (CustomerEventOnce), a duplicate one too, where an event with a version
// costs Handle's path (the claim's batch, the lock's check, the upsert,
// the version, the commit). A customer whose lock is held past the
// timeout fails the statement, which wrote nothing, and then Handle's
// path, as transient: nothing is recorded and the sender retries; the
// retry creates the customer.
func TestRegistrationReceivesAnEventInOneStatement(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	pool := setup(t)
	ctx := context.Background()
	cfg := pool.Config().Copy()
	sent := &pgtrace.RoundTrips{}
	cfg.ConnConfig.Tracer = sent
	traced, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(traced.Close)
	require.NoError(t, traced.Ping(ctx))
	verifier, err := inbox.NewVerifier(inbox.SchemeStandardWebhooks, []string{secret}, time.Minute)
	require.NoError(t, err)
	receiver := inbox.NewReceiver(inbox.ReceiverConfig{
		Pool: traced, Handlers: inbox.Registry{Name: Registration(Config{LockTimeout: 50 * time.Millisecond})},
		Sources: []inbox.Source{{Name: "crm", Scheme: inbox.SchemeStandardWebhooks, Verifier: verifier, Handler: Name}},
	})
	accept := func(id, body string) (inbox.Outcome, int64, error) {
		t.Helper()
		sent.Reset()
		res, err := receiver.Accept(ctx, "crm", signed(t, secret, id, []byte(body)), []byte(body))
		return res.Outcome, sent.Total(), err
	}
	outcome, statements, err := accept("evt_1", `{"customer": {"id": "cus_1", "name": "Ada"}}`)
	require.NoError(t, err)
	require.Equal(t, []any{inbox.OutcomeProcessed, int64(1)}, []any{outcome, statements}, "a new event")
	outcome, statements, err = accept("evt_1", `{"customer": {"id": "cus_1", "name": "Ada"}}`)
	require.NoError(t, err)
	require.Equal(t, []any{inbox.OutcomeDuplicate, int64(1)}, []any{outcome, statements}, "a duplicate")
	outcome, statements, err = accept("evt_2", `{"customer": {"id": "cus_1", "name": "Ada L."}}`)
	require.NoError(t, err)
	require.Equal(t, []any{inbox.OutcomeProcessed, int64(1)}, []any{outcome, statements}, "an update")
	outcome, statements, err = accept("evt_3", `{"customer": {"id": "cus_2", "name": "Bo"}, "version": 1}`)
	require.NoError(t, err)
	require.Equal(t, inbox.OutcomeProcessed, outcome)
	require.Greater(t, statements, int64(1), "an event with a version: Handle's path")

	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	require.NoError(t, advisory.Lock(ctx, holder, advisory.Key(lockNamespace, "cus_3"), time.Second))
	_, _, err = accept("evt_4", `{"customer": {"id": "cus_3", "name": "Cy"}}`)
	require.ErrorIs(t, err, inbox.ErrTransient)
	require.ErrorIs(t, err, advisory.ErrLockTimeout)
	require.NoError(t, holder.Rollback(ctx))
	outcome, _, err = accept("evt_4", `{"customer": {"id": "cus_3", "name": "Cy"}}`)
	require.NoError(t, err)
	require.Equal(t, inbox.OutcomeProcessed, outcome, "the retry")

	var names []string
	rows, err := pool.Query(ctx, `SELECT external_id || ' ' || name FROM switchyard_demo.customers ORDER BY external_id`)
	require.NoError(t, err)
	names, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"cus_1 Ada L.", "cus_2 Bo", "cus_3 Cy"}, names)
	var recorded, duplicates int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM switchyard.inbox_events WHERE status = 'processed' AND attempts = 0),
		(SELECT sum(count) FROM switchyard.inbox_duplicates)`).Scan(&recorded, &duplicates))
	require.Equal(t, []int{4, 1}, []int{recorded, duplicates}, "four events processed, none failed; one duplicate")
}
