package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
	d := New(pool, Config{Logger: testlog.New(t), AggregateBatch: large, Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
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
	require.Equal(t, rounds, generic, "the small finalize runs its generic plan every time, from the first (genericPlans)")
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

// genericPlans' Exec and QueryRow run in a transaction of their own, under
// the plan mode that forces generic plans, which ends with it: the
// session's next statement plans as PostgreSQL chooses again. A COMMIT
// that fails (a deferred constraint) is the statement's error, and
// nothing of it is kept.
func TestGenericPlansHoldTheirPlanModeForTheirOwnTransactionOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared := setup(t)
	pool := oneSessionPool(t, shared)
	mode := func(db queries.DBTX) string {
		t.Helper()
		var m string
		require.NoError(t, db.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&m))
		return m
	}
	session := backend(t, pool)
	require.Equal(t, "force_generic_plan", mode(genericPlans{pool}))
	require.Equal(t, "auto", mode(pool), "after the pipeline's transaction")
	require.Equal(t, session, backend(t, pool), "in the same session")

	tag, err := genericPlans{pool}.Exec(ctx, `CREATE TABLE switchyard.plan_mode_probe AS SELECT current_setting('plan_cache_mode') AS mode`)
	require.NoError(t, err)
	require.Equal(t, "SELECT 1", tag.String())
	var probed string
	require.NoError(t, shared.QueryRow(ctx, `SELECT mode FROM switchyard.plan_mode_probe`).Scan(&probed))
	require.Equal(t, "force_generic_plan", probed, "committed: another session sees it")

	err = genericPlans{pool}.QueryRow(ctx, `SELECT 1 WHERE false`).Scan(new(int))
	require.ErrorIs(t, err, pgx.ErrNoRows)
	require.Equal(t, session, backend(t, pool))
	require.True(t, idle(t, pool))

	_, err = shared.Exec(ctx, `CREATE TABLE switchyard.commit_probe (v int UNIQUE DEFERRABLE INITIALLY DEFERRED)`)
	require.NoError(t, err)
	_, err = genericPlans{pool}.Exec(ctx, `INSERT INTO switchyard.commit_probe VALUES (1), (1)`)
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
	d := New(pool, Config{Logger: testlog.New(t), LeaseDuration: time.Hour, Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
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
	require.Equal(t, 1, countWhere(t, shared, "state = 'pending' AND lease_owner = 'w' AND attempts = 1"), "the message is as the claim left it")
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

// claimingSession is a one-session pool on a new database with destination
// alpha, and a dispatcher of its own that claims there with leases that
// outlast the test (each claim leases only messages no claim leased before).
// Autovacuum is off for the outbox and its aggregates: their statistics
// change only when the test says so.
func claimingSession(t *testing.T) (*pgxpool.Pool, *Dispatcher) {
	t.Helper()
	pool := oneSessionPool(t, setup(t, "alpha"))
	d := New(pool, Config{Logger: testlog.New(t), LeaseDuration: time.Hour, Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	_, err := pool.Exec(context.Background(), `ALTER TABLE switchyard.outbox SET (autovacuum_enabled = false);
		ALTER TABLE switchyard.outbox_aggregates SET (autovacuum_enabled = false)`)
	require.NoError(t, err)
	return pool, d
}

// preparedStatements is how many prepared statements of the sqlc query name
// the pool's one session holds, and how often they were planned each way.
func preparedStatements(t *testing.T, pool *pgxpool.Pool, name string) (statements, generic, custom int) {
	t.Helper()
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*), coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
		FROM pg_prepared_statements WHERE statement LIKE '%name: ' || $1 || ' %'`, name).Scan(&statements, &generic, &custom))
	return statements, generic, custom
}

// The claims are planned for their arguments while the planner's
// statistics of their tables describe fewer than planStatisticsFloor rows
// (a generic plan made from them would read the tables sequentially, and
// be kept), unless the aggregates' table is small, and are prepared
// statements whose generic plan PostgreSQL keeps once the statistics are
// past it (read by the heartbeat): plans that read the outbox through its
// indexes, and return the same rows. A table that holds that many rows
// without statistics that say so is described (ANALYZE) by the heartbeat
// itself: autovacuum is off here, as it is for the first minute of a new
// outbox.
func TestClaimsKeepAGenericPlanOnlyOnceTheirTablesHaveStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, d := claimingSession(t)
	const rounds = 8 // more than the five custom plans before a generic one may be kept
	round := 0
	claimRounds := func() {
		t.Helper()
		for range rounds {
			round++
			aggregate := strconv.Itoa(round)
			enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)},
				Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: aggregate, Payload: []byte(`{}`)},
				Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: aggregate, Payload: []byte(`{}`)})
			groups, err := d.claim(ctx, "w", 10, nil)
			require.NoError(t, err)
			require.Len(t, groups, 2, "one unordered message, one aggregate's")
			var ordered group
			for _, g := range groups {
				if g.msgs[0].AggregateID != "" {
					ordered = g
				}
			}
			require.Len(t, ordered.msgs, 2, "the aggregate's two messages, in one delivery")
			head, next := ordered.msgs[0], ordered.msgs[1]
			require.Equal(t, []int64{1, 2}, []int64{head.AggregateSeq, next.AggregateSeq})
			require.True(t, head.Counted, "the head's attempt is counted by the claim")
			require.False(t, next.Counted, "the next one's at its finalize")
			require.Equal(t, []int32{1, 1}, []int32{head.Attempts, next.Attempts}, "the attempt each would be")
			require.Equal(t, []int64{1, 0}, []int64{head.LeaseVersion, next.LeaseVersion}, "only the head's row was leased")
			require.Equal(t, head.AggregateLeaseVersion, next.AggregateLeaseVersion)
			require.Positive(t, head.AggregateLeaseVersion)
		}
	}
	plan := func(name, args string) string {
		t.Helper()
		return preparedPlan(t, pool, name, args)
	}

	d.heartbeat(ctx)
	claimRounds()
	for _, name := range []string{"OutboxClaimUnordered", "OutboxClaimOrdered"} {
		statements, _, _ := preparedStatements(t, pool, name)
		require.Zero(t, statements, "%s is sent unnamed while the outbox has no statistics", name)
	}

	// statistics is what the planner's statistics say of a table's rows.
	statistics := func(table string) float64 {
		t.Helper()
		var rows float64
		require.NoError(t, pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = $1::regclass`, table).Scan(&rows))
		return rows
	}

	// A thousand rows in the outbox, which the heartbeat describes:
	// enough for the unordered claim, and for the ordered claim while the
	// aggregates' table is small.
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, state, finished_at)
		SELECT 't', 'alpha', '{}', 'delivered', now() FROM generate_series(1, $1::int)`, planStatisticsFloor)
	require.NoError(t, err)
	require.Less(t, statistics("switchyard.outbox"), float64(planStatisticsFloor))
	d.heartbeat(ctx)
	require.GreaterOrEqual(t, statistics("switchyard.outbox"), float64(planStatisticsFloor), "the heartbeat described the outbox")
	claimRounds()
	statements, generic, _ := preparedStatements(t, pool, "OutboxClaimUnordered")
	require.Equal(t, 1, statements, "the unordered claim is a prepared statement")
	require.Positive(t, generic, "PostgreSQL kept its generic plan")
	unordered := plan("OutboxClaimUnordered", `('w', NULL, 30, '{alpha}', '{alpha}', '{2026-12-04 12:00:00+00}', '{42}', '{10}', 10)`)
	require.Contains(t, unordered, "Index Scan using outbox_due_unordered", unordered)
	require.Contains(t, unordered, "Scan using outbox_aggregates_due", "the probe of the aggregates due reads their index: %s", unordered)
	require.Regexp(t, `Index Cond: .*ROW\(next_attempt_at, id\) > ROW`, unordered, "the scan starts after the mark: %s", unordered)
	require.NotContains(t, unordered, "Seq Scan on outbox ", unordered)
	// The aggregates' table, a few rows without statistics, is small
	// enough for any plan.
	statements, generic, _ = preparedStatements(t, pool, "OutboxClaimOrdered")
	require.Equal(t, 1, statements, "the ordered claim is a prepared statement while the aggregates' table is small")
	require.Positive(t, generic, "PostgreSQL kept its generic plan")

	// Grown past small, with fewer rows than the floor (the rest dead,
	// not vacuumed: autovacuum is off for it): nothing to describe yet,
	// and the ordered claim is planned for its arguments again, the
	// prepared statement unused.
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox_aggregates (destination, aggregate_type, aggregate_id, last_seq, done_seq)
		SELECT 'alpha', 'grown', k::text, 1, 1 FROM generate_series(1, 3000) AS k`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `DELETE FROM switchyard.outbox_aggregates WHERE aggregate_type = 'grown'`)
	require.NoError(t, err)
	var size int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_relation_size('switchyard.outbox_aggregates')`).Scan(&size))
	require.Greater(t, size, int64(smallAggregatesTable), "the aggregates' table is past small")
	d.heartbeat(ctx)
	_, genericBefore, customBefore := preparedStatements(t, pool, "OutboxClaimOrdered")
	_, unorderedBefore, _ := preparedStatements(t, pool, "OutboxClaimUnordered")
	claimRounds()
	_, genericAfter, customAfter := preparedStatements(t, pool, "OutboxClaimOrdered")
	require.Equal(t, []int{genericBefore, customBefore}, []int{genericAfter, customAfter},
		"the ordered claim is sent unnamed until the grown table has statistics")
	_, unorderedAfter, _ := preparedStatements(t, pool, "OutboxClaimUnordered")
	require.Equal(t, unorderedBefore, unorderedAfter, "so is the unordered claim, whose probe reads that table")

	// A thousand rows, which the heartbeat describes.
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox_aggregates (destination, aggregate_type, aggregate_id, last_seq, done_seq)
		SELECT 'alpha', 'history', k::text, 1, 1 FROM generate_series(1, $1::int) AS k`, planStatisticsFloor)
	require.NoError(t, err)
	d.heartbeat(ctx)
	require.GreaterOrEqual(t, statistics("switchyard.outbox_aggregates"), float64(planStatisticsFloor), "the heartbeat described the aggregates")
	claimRounds()
	statements, generic, _ = preparedStatements(t, pool, "OutboxClaimOrdered")
	require.Equal(t, 2, statements, "the ordered claim is a prepared statement of its own once the table has statistics")
	require.Greater(t, generic, genericAfter, "PostgreSQL kept its generic plan")
	ordered := plan("OutboxClaimOrdered", `('{alpha}', NULL, '{10}', 10, 'w', 30, 32, '{2026-12-04 12:00:00+00}', '{42}')`)
	// outbox_due_unordered: the probe of the unordered messages due.
	for _, index := range []string{"outbox_aggregates_due", "outbox_pending_ordered", "outbox_due_unordered"} {
		require.Contains(t, ordered, "Index Scan using "+index, ordered)
	}
	require.Regexp(t, `Index Cond: .*ROW\(next_attempt_at, id\) > ROW`, ordered, "the probe starts after the mark: %s", ordered)
	require.NotContains(t, ordered, "Seq Scan on outbox ", ordered)
	statements, _, _ = preparedStatements(t, pool, "OutboxClaimUnordered")
	require.Equal(t, 2, statements, "the unordered claim, too, once the table has statistics")
	unordered = plan("OutboxClaimUnordered", `('w', NULL, 30, '{alpha}', '{alpha}', '{2026-12-04 12:00:00+00}', '{42}', '{10}', 10)`)
	require.Contains(t, unordered, "Scan using outbox_aggregates_due", "its probe reads the aggregates' index: %s", unordered)
	require.NotContains(t, unordered, "Seq Scan on outbox_aggregates", unordered)
}

// preparedPlan is EXPLAIN of the pool's one session's prepared statement of
// the sqlc query name, with args: the plan PostgreSQL would run.
func preparedPlan(t *testing.T, pool *pgxpool.Pool, name, args string) string {
	t.Helper()
	ctx := context.Background()
	var statement string
	// The latest, if the claim was also prepared while the aggregates'
	// table was small (whileSmallTag).
	require.NoError(t, pool.QueryRow(ctx, `SELECT name FROM pg_prepared_statements WHERE statement LIKE '%name: ' || $1 || ' %'
		ORDER BY prepare_time DESC LIMIT 1`, name).Scan(&statement))
	rows, err := pool.Query(ctx, "EXPLAIN EXECUTE "+pgx.Identifier{statement}.Sanitize()+args)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// Over many aggregates, few of them due, the ordered claim keeps its
// generic plan, which leases the aggregates it chose through their key.
// Its LIMITs were all parameters, which a generic plan takes to pass a
// tenth of their input: over 30,000 aggregates it expected a thousand to
// lease and hashed the whole table to find them, PostgreSQL estimated it
// dearer than any plan for the arguments, and planned every claim anew
// (BENCHMARKS.md, "The ordered claim's generic plan over many
// aggregates").
func TestTheOrderedClaimKeepsItsGenericPlanOverManyAggregates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, d := claimingSession(t)
	// 30,000 aggregates with nothing pending, and history enough for the
	// outbox to be described; then the statistics, as autovacuum would.
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.outbox_aggregates (destination, aggregate_type, aggregate_id, last_seq, done_seq)
		SELECT 'alpha', 'order', 'done-' || k, 3, 3 FROM generate_series(1, 30000) AS k`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, state, finished_at)
		SELECT 't', 'alpha', '{}', 'delivered', now() FROM generate_series(1, $1::int)`, planStatisticsFloor)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE switchyard.outbox; ANALYZE switchyard.outbox_aggregates`)
	require.NoError(t, err)
	d.heartbeat(ctx)
	require.True(t, d.stats.aggregates.Load(), "the dispatcher read the aggregates' statistics")

	const rounds = 8 // more than the five plans for their arguments before a generic one may be kept
	for round := range rounds {
		aggregate := fmt.Sprintf("due-%d", round)
		enqueue(t, pool, Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: aggregate, Payload: []byte(`{}`)},
			Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: aggregate, Payload: []byte(`{}`)})
		groups, err := d.claim(ctx, "w", 10, nil)
		require.NoError(t, err)
		require.Len(t, groups, 1, "the new aggregate, the others leased or done")
		require.Equal(t, aggregate, groups[0].msgs[0].AggregateID)
		require.Len(t, groups[0].msgs, 2, "its two messages, in order")
	}
	statements, generic, custom := preparedStatements(t, pool, "OutboxClaimOrdered")
	require.Equal(t, 1, statements)
	require.Equal(t, []int{rounds - 5, 5}, []int{generic, custom}, "PostgreSQL kept the generic plan after its five plans for the arguments")
	ordered := preparedPlan(t, pool, "OutboxClaimOrdered", `('{alpha}', NULL, '{10}', 10, 'w', 30, 32, '{2026-12-04 12:00:00+00}', '{42}')`)
	require.Contains(t, ordered, "Index Scan using outbox_aggregates_pkey", "the aggregates are leased through their key: %s", ordered)
	require.NotContains(t, ordered, "Seq Scan on outbox_aggregates", ordered)
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

// cteRows is the planner's estimate of the rows of the CTE named name in
// an EXPLAIN (FORMAT JSON) plan, or 0 if it has none.
func cteRows(node map[string]any, name string) float64 {
	if node["Subplan Name"] == "CTE "+name {
		rows, _ := node["Plan Rows"].(float64)
		return rows
	}
	children, _ := node["Plans"].([]any)
	for _, c := range children {
		if child, ok := c.(map[string]any); ok {
			if rows := cteRows(child, name); rows > 0 {
				return rows
			}
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
