package reconcile

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/reconcile/fakeremote"
	"github.com/switchyard/switchyard/internal/testlog"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// env is a test's database, fake provider and HTTP client.
type env struct {
	t      *testing.T
	pool   *pgxpool.Pool
	remote *fakeremote.Provider // the orders' external system
	hooks  *fakeremote.Provider // the webhook receiver of destination "d"
	client *http.Client
}

// setup returns a database with destination "d" and a table orders(id,
// status, total) of n rows, a provider holding exactly those rows, and a
// client for runners.
func setup(t *testing.T, n int) *env {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.New(t)
	require.NoError(t, queries.New(pool).DestinationUpsert(ctx, queries.DestinationUpsertParams{
		Name: "d", Kind: "function", RetryBaseMs: 1000, RetryCapMs: 600000, MaxAttempts: 12,
		TimeoutMs: 10000, Burst: 1, Concurrency: 16, BreakerFailureRatio: 0.5, BreakerMinRequests: 10, BreakerOpenMs: 30000,
	}))
	_, err := pool.Exec(ctx, `CREATE TABLE public.orders (id bigint PRIMARY KEY, status text NOT NULL, total integer NOT NULL)`)
	require.NoError(t, err)
	e := &env{t: t, pool: pool, remote: fakeremote.New(), hooks: fakeremote.New(), client: &http.Client{}}
	t.Cleanup(func() { e.remote.Close(); e.hooks.Close(); e.client.CloseIdleConnections() })
	e.addRows(1, n)
	return e
}

// addRows inserts orders from..to locally and, with remote, on the provider.
func (e *env) addRows(from, to int) {
	e.t.Helper()
	_, err := e.pool.Exec(context.Background(), `INSERT INTO public.orders (id, status, total)
		SELECT i, CASE WHEN i % 3 = 0 THEN 'paid' ELSE 'open' END, i * 7 FROM generate_series($1::int, $2::int) i`, from, to)
	require.NoError(e.t, err)
	var fields []byte
	for i := from; i <= to; i++ {
		fields = orderJSON(fields[:0], i)
		e.remote.PutJSON(strconv.Itoa(i), fields)
	}
}

func orderFields(i int) map[string]any {
	status := "open"
	if i%3 == 0 {
		status = "paid"
	}
	return map[string]any{"status": status, "total": i * 7}
}

// orderJSON appends orderFields(i) as encoding/json writes it, without
// its reflection: seeding 100,000 entities with json.Marshal took seconds
// under the race detector.
func orderJSON(b []byte, i int) []byte {
	status := "open"
	if i%3 == 0 {
		status = "paid"
	}
	b = append(append(append(b, `{"status":"`...), status...), `","total":`...)
	return append(strconv.AppendInt(b, int64(i*7), 10), '}')
}

// inProcess asks a provider in process (fakeremote.Provider.Lookup)
// instead of over HTTP: the remote of the 100,000-row test, where the
// JSON of every entity, encoded and decoded on both sides under the race
// detector, cost most of a minute. The HTTP contract is proven by the
// other tests, the same drift included (TestNextCycleResolvesHealedDrift).
type inProcess struct{ p *fakeremote.Provider }

func (r inProcess) Lookup(_ context.Context, req LookupRequest) ([]Entity, error) {
	var rng *fakeremote.Range
	if req.Range != nil {
		rng = &fakeremote.Range{After: req.Range.After, Through: req.Range.Through}
	}
	found, err := r.p.Lookup(req.Keys, rng)
	if err != nil {
		return nil, err
	}
	out := make([]Entity, len(found))
	for i, f := range found {
		out[i] = Entity{Key: f.Key, RawFields: f.Fields}
	}
	return out, nil
}

// tableCheck adds a table check of orders against the provider.
func (e *env) tableCheck(name string, batch int, rate float64, leaseMs int32) Check {
	e.t.Helper()
	q := queries.New(e.pool)
	id, err := q.ReconcileCheckInsert(context.Background(), queries.ReconcileCheckInsertParams{
		Name: name, Kind: KindTable, BatchSize: int32(batch), RemoteRate: rate, TimeoutMs: 2000, IntervalMs: 3600000,
		RemoteUrl: e.remote.URL(), Destination: "d", Topic: "order.state", WindowMs: 86400000,
		TableSchema: "public", TableName: "orders", KeyColumn: "id", Columns: []string{"status", "total"}, LeaseMs: leaseMs,
	})
	require.NoError(e.t, err)
	row, err := q.ReconcileCheckGet(context.Background(), id)
	require.NoError(e.t, err)
	return checkFromRow(row)
}

func (e *env) runner(owner string) *Runner {
	return NewRunner(e.pool, Config{Owner: owner, Client: e.client, Attempts: 2, Backoff: time.Millisecond, MaxFailedBatches: 2,
		Logger: testlog.New(e.t)})
}

// inProcessRunner is runner(owner) whose table checks ask e.remote in
// process (inProcess).
func (e *env) inProcessRunner(owner string) *Runner {
	table := func(_ context.Context, pool *pgxpool.Pool, _ *http.Client, c Check) (Source, Remote, error) {
		src, err := NewTableSource(pool, c.TableSchema, c.TableName, c.KeyColumn, c.Columns)
		if err != nil {
			return nil, nil, err
		}
		return src, inProcess{e.remote}, nil
	}
	return NewRunner(e.pool, Config{Owner: owner, Attempts: 2, Backoff: time.Millisecond, MaxFailedBatches: 2,
		Kinds: map[string]Kind{KindTable: table}, Logger: testlog.New(e.t)})
}

// runCycle runs one cycle of the one due check to its end.
func (e *env) runCycle(r *Runner) queries.SwitchyardReconcileCycle {
	e.t.Helper()
	ran, err := r.RunOnce(context.Background())
	require.NoError(e.t, err)
	require.True(e.t, ran, "a check was due")
	return e.lastCycle()
}

func (e *env) lastCycle() queries.SwitchyardReconcileCycle {
	e.t.Helper()
	var id int64
	require.NoError(e.t, e.pool.QueryRow(context.Background(), "SELECT max(id) FROM switchyard.reconcile_cycles").Scan(&id))
	var y queries.SwitchyardReconcileCycle
	rows, err := e.pool.Query(context.Background(), "SELECT * FROM switchyard.reconcile_cycles WHERE id = $1", id)
	require.NoError(e.t, err)
	y, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[queries.SwitchyardReconcileCycle])
	require.NoError(e.t, err)
	return y
}

// findings returns the check's findings with status, as "kind key".
func (e *env) findings(status string) map[string]bool {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(),
		"SELECT kind || ' ' || key FROM switchyard.reconcile_findings WHERE status = $1", status)
	require.NoError(e.t, err)
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(e.t, err)
	out := map[string]bool{}
	for _, k := range keys {
		out[k] = true
	}
	return out
}

// runWhenLeaseFree runs r until it gets a check (another runner's lease
// must expire first), within limit.
func (e *env) runWhenLeaseFree(r *Runner, limit time.Duration) {
	e.t.Helper()
	testwait.Until(e.t, limit, "a check whose lease is free", func() bool {
		ran, err := r.RunOnce(context.Background())
		require.NoError(e.t, err)
		return ran
	})
}
