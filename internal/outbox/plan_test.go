package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/pgtrace"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/testlog"
	"github.com/switchyard/switchyard/internal/testwait"
)

// A large finalize and the heartbeat are planned for their own arguments
// every time, never from a prepared statement whose generic plan
// PostgreSQL may keep after five executions (see customPlans): on an
// outbox with millions of delivered rows retained, the finalize's generic
// plan rescanned its whole input for every message it updated. Large is
// what cannot be split into statements of genericPlanMost (genericChunks):
// here, one aggregate's messages, more than that. A small finalize
// (genericPlanMost) stays a prepared statement, and always runs its
// generic plan: planning it would cost more than the worst that plan can
// do. A statement sent
// unnamed is not among the session's prepared statements, and a prepared
// one counts the executions planned from it.
func TestLargeFinalizesAndHeartbeatsAreNeverPreparedStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := oneSessionPool(t, setup(t, "alpha"))
	const rounds = 7 // more than the five custom plans before a generic one may be kept
	const large = genericPlanMost + 8
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), AggregateBatch: large, Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	w := newWorker(d, "w")
	for range rounds {
		msgs := []Message{{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)}}
		for range large {
			msgs = append(msgs, Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: "1", Payload: []byte(`{}`)})
		}
		enqueue(t, pool, msgs...)
		groups, err := d.claim(ctx, "w", 10, nil)
		require.NoError(t, err)
		require.Len(t, groups, 2, "one unordered message, one aggregate's messages")
		clear(w.flights)
		for i, g := range groups {
			w.flights[uint64(i)] = &flight{g: g, cancel: func() {}}
		}
		extended, err := w.extend(ctx)
		require.NoError(t, err)
		require.Len(t, extended, 2, "the heartbeat extended both leases")
		for _, g := range groups {
			now := time.Now()
			results := make([]result, len(g.msgs))
			for i, m := range g.msgs {
				results[i] = result{msg: m, outcome: outcomeDelivered, started: now, finished: now}
			}
			_, _, err = d.finalize(ctx, "w", results)
			require.NoError(t, err)
		}
	}
	require.Equal(t, rounds*(1+large), countWhere(t, pool, "state = 'delivered'"))

	planned := func(name string) (statements, executions int) {
		statements, generic, custom := preparedStatements(t, pool, name)
		return statements, generic + custom
	}
	statements, executions := planned("OutboxFinalize")
	require.Equal(t, 1, statements, "the small finalize is a prepared statement")
	require.Equal(t, rounds, executions, "the large finalizes are sent unnamed, planned for their arguments")
	_, generic, _ := preparedStatements(t, pool, "OutboxFinalize")
	require.Equal(t, rounds, generic, "the small finalize runs its generic plan every time, from the first (sendGeneric)")
	statements, _ = planned("OutboxExtendLeases")
	require.Zero(t, statements, "the heartbeat is sent unnamed, planned for its arguments")
	statements, _ = planned("OutboxExtendAggregateLeases")
	require.Zero(t, statements, "the aggregates' heartbeat likewise")
}

// backend is the server process of the pool's session (oneSessionPool).
func backend(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var pid int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&pid))
	return pid
}

// idle says whether the pool's session is outside any transaction.
func idle(t *testing.T, pool *pgxpool.Pool) bool {
	t.Helper()
	conn, err := pool.Acquire(context.Background())
	require.NoError(t, err)
	defer conn.Release()
	return conn.Conn().PgConn().TxStatus() == 'I'
}

// sendGeneric's statements run in a transaction of their own, under the
// plan mode that forces generic plans, which ends with it: the session's
// next statement plans as PostgreSQL chooses again. A COMMIT that fails
// (a deferred constraint) is sendGeneric's error, and nothing of the
// transaction is kept; a statement's error is too, and nothing is left
// open.
func TestSendGenericHoldsItsPlanModeForItsOwnTransactionOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared := setup(t)
	pool := oneSessionPool(t, shared)
	// run sends sql alone through sendGeneric, and reads its one row into
	// dest, if given, or its command tag.
	run := func(sql string, dest ...any) (pgconn.CommandTag, error) {
		var tag pgconn.CommandTag
		err := sendGeneric(ctx, pool, func(b *pgx.Batch) error {
			b.Queue(sql)
			return nil
		}, func(results pgx.BatchResults) error {
			if len(dest) > 0 {
				return results.QueryRow().Scan(dest...)
			}
			var err error
			tag, err = results.Exec()
			return err
		})
		return tag, err
	}
	session := backend(t, pool)
	var mode string
	_, err := run(`SELECT current_setting('plan_cache_mode')`, &mode)
	require.NoError(t, err)
	require.Equal(t, "force_generic_plan", mode)
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&mode))
	require.Equal(t, "auto", mode, "after the pipeline's transaction")
	require.Equal(t, session, backend(t, pool), "in the same session")

	tag, err := run(`CREATE TABLE switchyard.plan_mode_probe AS SELECT current_setting('plan_cache_mode') AS mode`)
	require.NoError(t, err)
	require.Equal(t, "SELECT 1", tag.String())
	var probed string
	require.NoError(t, shared.QueryRow(ctx, `SELECT mode FROM switchyard.plan_mode_probe`).Scan(&probed))
	require.Equal(t, "force_generic_plan", probed, "committed: another session sees it")

	_, err = run(`SELECT 1 WHERE false`, new(int))
	require.ErrorIs(t, err, pgx.ErrNoRows)
	require.Equal(t, session, backend(t, pool))
	require.True(t, idle(t, pool))

	_, err = shared.Exec(ctx, `CREATE TABLE switchyard.commit_probe (v int UNIQUE DEFERRABLE INITIALLY DEFERRED)`)
	require.NoError(t, err)
	_, err = run(`INSERT INTO switchyard.commit_probe VALUES (1), (1)`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "the COMMIT's error")
	require.Equal(t, "23505", pgErr.Code)
	var rows int
	require.NoError(t, shared.QueryRow(ctx, `SELECT count(*) FROM switchyard.commit_probe`).Scan(&rows))
	require.Zero(t, rows)
	require.True(t, idle(t, pool), "no transaction left open")
}

// A small finalize is one round trip (BEGIN, the plan mode, the finalize
// and COMMIT in one pipeline), reported done only once committed; one
// that the server refuses changes nothing, and the session it failed in,
// left in a failed transaction, is closed by the pool, not used again.
func TestASmallFinalizeIsOneRoundTripCommittedOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared := setup(t, "alpha")
	pool, trips := tracedSessionPool(t, shared)
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), LeaseDuration: time.Hour, Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	enqueue(t, shared, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)})
	groups, err := d.claim(ctx, "w", 10, nil)
	require.NoError(t, err)
	require.Len(t, groups, 1)
	finalize := func(errText string) error {
		now := time.Now()
		_, _, err := d.finalize(ctx, "w", []result{{msg: groups[0].msgs[0], outcome: outcomeRetry, retryDelay: time.Hour,
			err: errText, started: now, finished: now}})
		return err
	}

	// PostgreSQL's text cannot hold a NUL: the server refuses the
	// finalize's arguments, after the pipeline's BEGIN.
	session := backend(t, pool)
	trips.Reset()
	err = finalize("refused\x00")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "refused by the server")
	require.Equal(t, [2]int64{0, 1}, [2]int64{trips.Statements(), trips.Pipelines()}, "sent, as one pipeline")
	require.Equal(t, 1, countWhere(t, shared, "state = 'pending' AND "+inStretchOf, "w"), "the message is as the claim left it")
	require.Zero(t, countWhere(t, shared, "last_error IS NOT NULL"))
	require.NotEqual(t, session, backend(t, pool), "the failed session was closed")

	trips.Reset()
	require.NoError(t, finalize("retry later"))
	require.Equal(t, [2]int64{0, 1}, [2]int64{trips.Statements(), trips.Pipelines()}, "one pipeline, no statement on its own")
	require.Equal(t, 1, countWhere(t, shared, "state = 'pending' AND lease_owner IS NULL AND last_error = 'retry later'"),
		"committed: another session sees it")
	require.True(t, idle(t, pool), "no transaction left open")
}

// tracedSessionPool is a pool of one connection to shared's database
// whose statements and pipelines trips counts.
func tracedSessionPool(t *testing.T, shared *pgxpool.Pool) (*pgxpool.Pool, *pgtrace.RoundTrips) {
	t.Helper()
	config := shared.Config()
	config.MaxConns = 1
	trips := &pgtrace.RoundTrips{}
	config.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(context.Background(), config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, trips
}

// oneSessionPool is a pool of one connection to shared's database: one
// session, whose prepared statements a test can read.
func oneSessionPool(t *testing.T, shared *pgxpool.Pool) *pgxpool.Pool {
	t.Helper()
	config := shared.Config()
	config.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// preparedStatements is how many prepared statements of the sqlc query name
// the pool's sessions hold (those idle: all of them, between a test's
// statements), one statement however many sessions prepared it (pgx names
// a statement after its text), and how often they were planned each way.
func preparedStatements(t *testing.T, pool *pgxpool.Pool, name string) (statements, generic, custom int) {
	t.Helper()
	type prepared struct {
		Name            string
		Generic, Custom int
	}
	names := map[string]bool{}
	for _, conn := range pool.AcquireAllIdle(context.Background()) {
		rows, err := conn.Query(context.Background(), `SELECT name, generic_plans, custom_plans
			FROM pg_prepared_statements WHERE statement LIKE '%name: ' || $1 || ' %'`, name)
		var got []prepared
		if err == nil {
			got, err = pgx.CollectRows(rows, pgx.RowToStructByPos[prepared])
		}
		// Released before any assertion: a connection kept would hold up
		// the pool's Close, and a failing test would hang instead.
		conn.Release()
		require.NoError(t, err)
		for _, p := range got {
			names[p.Name] = true
			generic, custom = generic+p.Generic, custom+p.Custom
		}
	}
	return len(names), generic, custom
}

// claimStatements is preparedStatements of the claim name over the
// sessions of the dispatcher's pool and of its claims' pool (claimPool).
func claimStatements(t *testing.T, d *Dispatcher, name string) (statements, generic, custom int) {
	t.Helper()
	claims, err := d.claimPool()
	require.NoError(t, err)
	statements, generic, custom = preparedStatements(t, d.pool, name)
	s, g, c := preparedStatements(t, claims, name)
	return statements + s, generic + g, custom + c
}

// A new outbox is described as soon as the dispatcher has claimed as many
// messages as the planner's statistics need (planStatisticsFloor), not
// only at the next heartbeat, nor a minute later by autovacuum: until
// then every claim is planned for its arguments (BENCHMARKS.md, "Planned
// claims on a new outbox").
func TestTheDispatcherDescribesANewOutboxOnceItHasClaimedEnough(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	_, err := pool.Exec(ctx, `ALTER TABLE switchyard.outbox SET (autovacuum_enabled = false)`)
	require.NoError(t, err)
	d := startDispatcher(t, pool, Config{HeartbeatInterval: time.Hour, Routes: map[string]Route{"alpha": {Destination: acceptAll}}})
	require.True(t, d.stats.planned(), "a new outbox has no statistics")
	msgs := make([]Message, planStatisticsFloor)
	for i := range msgs {
		msgs[i] = Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)}
	}
	enqueue(t, pool, msgs...)
	d.Wake()
	testwait.Until(t, time.Minute, "the outbox described", func() bool {
		var rows float64
		require.NoError(t, pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = 'switchyard.outbox'::regclass`).Scan(&rows))
		return rows >= planStatisticsFloor && d.stats.outbox.Load()
	})
}

// A small finalize's generic plan expects no more aggregates than
// messages: both come as unnests of array parameters. The aggregates'
// positions were a generate_series over one, which a generic plan takes
// to be a thousand rows, and each small finalize then read and hashed all
// of outbox_aggregates to lock the few rows it moves on.
func TestASmallFinalizesGenericPlanExpectsNoMoreAggregatesThanMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	var finalize capturedQuery
	_, err := queries.New(&finalize).OutboxFinalize(ctx, queries.OutboxFinalizeParams{})
	require.ErrorIs(t, err, errCaptured)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `PREPARE small_finalize AS `+finalize.sql, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	// The generic plan does not depend on the arguments, and EXPLAIN
	// without ANALYZE runs nothing.
	nulls := strings.Repeat("NULL, ", len(finalize.args)-1) + "NULL"
	var plan []byte
	require.NoError(t, tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE small_finalize(`+nulls+`)`,
		pgx.QueryExecModeSimpleProtocol).Scan(&plan))
	var explained []struct{ Plan map[string]any }
	require.NoError(t, json.Unmarshal(plan, &explained))
	require.Len(t, explained, 1)
	messages, aggregates := cteRows(explained[0].Plan, "input"), cteRows(explained[0].Plan, "aggregate_input")
	require.Positive(t, messages, "input's estimate: %s", plan)
	require.Positive(t, aggregates, "aggregate_input's estimate: %s", plan)
	require.LessOrEqual(t, aggregates, messages, "the aggregates are expected to be no more than the messages")
}

// planNodes are node and every node under it in an EXPLAIN (FORMAT JSON)
// plan, parents before their children.
func planNodes(node map[string]any) []map[string]any {
	nodes := []map[string]any{node}
	for _, child := range planChildren(node) {
		nodes = append(nodes, planNodes(child)...)
	}
	return nodes
}

// planChildren are the nodes directly under node.
func planChildren(node map[string]any) []map[string]any {
	var children []map[string]any
	plans, _ := node["Plans"].([]any)
	for _, p := range plans {
		if child, ok := p.(map[string]any); ok {
			children = append(children, child)
		}
	}
	return children
}

// outboxIndexConds are the index conditions of the scans of the outbox as
// o in a plan: a bitmap heap scan's is its recheck condition, and a scan
// with none (a sequential one) gives "".
func outboxIndexConds(plan map[string]any) []string {
	var conds []string
	for _, node := range planNodes(plan) {
		if node["Relation Name"] != "outbox" || node["Alias"] != "o" || node["Node Type"] == "ModifyTable" {
			continue
		}
		cond, ok := node["Index Cond"].(string)
		if !ok {
			cond, _ = node["Recheck Cond"].(string)
		}
		conds = append(conds, cond)
	}
	return conds
}

// rescansInput reports whether a plan joins by a nested loop whose inner
// side reads the CTE input: once for every row of its outer side (the
// generic plan's worst case: see genericPlanMost).
func rescansInput(plan map[string]any) bool {
	for _, node := range planNodes(plan) {
		if node["Node Type"] != "Nested Loop" {
			continue
		}
		for _, child := range planChildren(node) {
			if child["Parent Relationship"] == "Inner" && child["CTE Name"] == "input" {
				return true
			}
		}
	}
	return false
}

// cteRows is the planner's estimate of the rows of the CTE named name in
// a plan, or 0 if it has none.
func cteRows(plan map[string]any, name string) float64 {
	for _, node := range planNodes(plan) {
		if node["Subplan Name"] == "CTE "+name {
			rows, _ := node["Plan Rows"].(float64)
			return rows
		}
	}
	return 0
}

// errCaptured is what capturedQuery returns instead of running a query.
var errCaptured = errors.New("captured, not run")

// capturedQuery is a queries.DBTX that keeps the SQL and arguments of the
// query it is given, and runs nothing (CopyFrom and SendBatch, of the nil
// DBTX it embeds, are not for it).
type capturedQuery struct {
	queries.DBTX
	sql  string
	args []any
}

func (c *capturedQuery) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.sql, c.args = sql, args
	return pgconn.CommandTag{}, errCaptured
}

func (c *capturedQuery) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.sql, c.args = sql, args
	return nil, errCaptured
}

func (c *capturedQuery) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	c.sql, c.args = sql, args
	return capturedRow{}
}

// capturedRow is capturedQuery's row: its Scan reports errCaptured.
type capturedRow struct{}

func (capturedRow) Scan(...any) error { return errCaptured }
