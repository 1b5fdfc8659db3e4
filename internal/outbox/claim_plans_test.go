package outbox

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/testlog"
	"github.com/switchyard/switchyard/internal/testwait"
)

// claimingSession is a one-session pool on a new database with destination
// alpha, and a dispatcher of its own that claims there with leases that
// outlast the test (each claim leases only messages no claim leased before).
// Autovacuum is off for the outbox and its aggregates: their statistics
// change only when the test says so.
func claimingSession(t *testing.T) (*pgxpool.Pool, *Dispatcher) {
	t.Helper()
	pool := oneSessionPool(t, setup(t, "alpha"))
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), LeaseDuration: time.Hour, Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	_, err := pool.Exec(context.Background(), `ALTER TABLE switchyard.outbox SET (autovacuum_enabled = false);
		ALTER TABLE switchyard.outbox_aggregates SET (autovacuum_enabled = false)`)
	require.NoError(t, err)
	return pool, d
}

// The claims are planned for their arguments while the planner's
// statistics of their tables describe fewer than planStatisticsFloor rows
// (a generic plan made from them would read the tables sequentially, and
// be kept), unless the aggregates' table is small, and are prepared
// statements once the statistics are past it (read by the heartbeat),
// run on their generic plans (runClaim): plans that read the outbox
// through its indexes, and return the same rows. A table that holds that many rows
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
		return preparedPlan(t, d, name, args)
	}

	d.heartbeat(ctx)
	claimRounds()
	for _, name := range []string{"OutboxClaimUnordered", "OutboxClaimOrdered"} {
		statements, _, _ := claimStatements(t, d, name)
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
	statements, generic, custom := claimStatements(t, d, "OutboxClaimUnordered")
	require.Equal(t, 1, statements, "the unordered claim is a prepared statement")
	require.Zero(t, custom, "never planned for its arguments")
	require.GreaterOrEqual(t, generic, rounds, "its generic plan run at each claim")
	unordered := plan("OutboxClaimUnordered", `('{alpha}', NULL, '{alpha}', '{2026-12-04 12:00:00+00}', '{42}', '{10}', 10, 'w', 30)`)
	require.Contains(t, unordered, "Index Scan using outbox_due_unordered", unordered)
	require.Contains(t, unordered, "Scan using outbox_aggregates_due", "the probe of the aggregates due reads their index: %s", unordered)
	require.Regexp(t, `Index Cond: .*ROW\(next_attempt_at, id\) > ROW`, unordered, "the scan starts after the mark: %s", unordered)
	require.NotContains(t, unordered, "Seq Scan on outbox ", unordered)
	// The aggregates' table, a few rows without statistics, is small
	// enough for any plan.
	statements, generic, _ = claimStatements(t, d, "OutboxClaimOrdered")
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
	_, genericBefore, customBefore := claimStatements(t, d, "OutboxClaimOrdered")
	_, unorderedBefore, _ := claimStatements(t, d, "OutboxClaimUnordered")
	claimRounds()
	_, genericAfter, customAfter := claimStatements(t, d, "OutboxClaimOrdered")
	require.Equal(t, []int{genericBefore, customBefore}, []int{genericAfter, customAfter},
		"the ordered claim is sent unnamed until the grown table has statistics")
	_, unorderedAfter, _ := claimStatements(t, d, "OutboxClaimUnordered")
	require.Equal(t, unorderedBefore, unorderedAfter, "so is the unordered claim, whose probe reads that table")

	// A thousand rows, which the heartbeat describes (ANALYZE): the claims
	// are the same prepared statements again, their generic plans made
	// anew from the new statistics, and reading the aggregates' indexes.
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox_aggregates (destination, aggregate_type, aggregate_id, last_seq, done_seq)
		SELECT 'alpha', 'history', k::text, 1, 1 FROM generate_series(1, $1::int) AS k`, planStatisticsFloor)
	require.NoError(t, err)
	d.heartbeat(ctx)
	require.GreaterOrEqual(t, statistics("switchyard.outbox_aggregates"), float64(planStatisticsFloor), "the heartbeat described the aggregates")
	claimRounds()
	statements, generic, _ = claimStatements(t, d, "OutboxClaimOrdered")
	require.Equal(t, 1, statements, "the same prepared statement as while the table was small")
	require.Greater(t, generic, genericAfter, "PostgreSQL kept its generic plan")
	ordered := plan("OutboxClaimOrdered", `('{alpha}', NULL, '{10}', 10, 'w', 30, 32, '{2026-12-04 12:00:00+00}', '{42}')`)
	// outbox_due_unordered: the probe of the unordered messages due.
	for _, index := range []string{"outbox_aggregates_due", "outbox_pending_ordered", "outbox_due_unordered"} {
		require.Contains(t, ordered, "Index Scan using "+index, ordered)
	}
	require.Regexp(t, `Index Cond: .*ROW\(next_attempt_at, id\) > ROW`, ordered, "the probe starts after the mark: %s", ordered)
	require.NotContains(t, ordered, "Seq Scan on outbox ", ordered)
	statements, _, _ = claimStatements(t, d, "OutboxClaimUnordered")
	require.Equal(t, 1, statements, "the unordered claim, too")
	unordered = plan("OutboxClaimUnordered", `('{alpha}', NULL, '{alpha}', '{2026-12-04 12:00:00+00}', '{42}', '{10}', 10, 'w', 30)`)
	require.Contains(t, unordered, "Scan using outbox_aggregates_due", "its probe reads the aggregates' index: %s", unordered)
	require.NotContains(t, unordered, "Seq Scan on outbox_aggregates", unordered)
}

// preparedPlan is EXPLAIN of the generic plan of the prepared statement
// of the claim name, with args, on the session of the dispatcher's claims'
// pool that holds it, under that session's settings (claimSettings): the
// plan a claim runs (runClaim).
func preparedPlan(t *testing.T, d *Dispatcher, name, args string) string {
	t.Helper()
	return explainPrepared(t, d, "EXPLAIN", name, args)
}

// preparedPlanRun is preparedPlan run (EXPLAIN ANALYZE, without timing),
// in a transaction rolled back: the rows each node of that plan read, and
// how many times, with nothing leased.
func preparedPlanRun(t *testing.T, d *Dispatcher, name, args string) string {
	t.Helper()
	return explainPrepared(t, d, "EXPLAIN (ANALYZE, TIMING OFF)", name, args)
}

// explainPrepared runs explain (an EXPLAIN with its options) of the
// prepared claim name with args, as preparedPlan says.
func explainPrepared(t *testing.T, d *Dispatcher, explain, name, args string) string {
	t.Helper()
	ctx := context.Background()
	claims, err := d.claimPool()
	require.NoError(t, err)
	conns := claims.AcquireAllIdle(ctx)
	defer func() {
		for _, conn := range conns {
			conn.Release()
		}
	}()
	for _, conn := range conns {
		var statement string
		err := conn.QueryRow(ctx, `SELECT name FROM pg_prepared_statements WHERE statement LIKE '%name: ' || $1 || ' %'`,
			name).Scan(&statement)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		require.NoError(t, err)
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		rows, err := tx.Query(ctx, explain+" EXECUTE "+pgx.Identifier{statement}.Sanitize()+args)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.NoError(t, tx.Rollback(ctx))
		return strings.Join(lines, "\n")
	}
	require.Failf(t, "no prepared claim", "%s is prepared on none of the claims' sessions", name)
	return ""
}

// Under a backlog, where each claim leases hundreds of messages, the
// unordered claim runs on its generic plan from its first execution once
// the outbox is described, never planned for its arguments: left to
// choose, PostgreSQL estimated that plan (whose LIMITs are parameters) at
// twice the plan for such a claim's arguments, and planned every claim of
// a drain anew (BENCHMARKS.md, "What an unordered drain waits on, and
// the unordered claim on its generic plan"). The first messages due are
// leased, each once.
func TestALargeUnorderedClaimRunsOnItsGenericPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, d := claimingSession(t)
	// A drain's backlog, and its claims' size.
	const backlog, claims, deliveries, perDelivery = 100_000, 6, 10, 100
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload)
		SELECT 't', 'alpha', '{}' FROM generate_series(1, $1::int)`, backlog)
	require.NoError(t, err)
	d.heartbeat(ctx)
	require.Equal(t, claimPrepared, d.claimModeNow(), "the heartbeat described the outbox")

	var leased []int64
	for range claims {
		groups, _, err := d.claimPaced(ctx, claimRequest{worker: "w", limit: deliveries, sizes: map[string]int{"alpha": perDelivery}})
		require.NoError(t, err)
		require.Len(t, groups, deliveries)
		for _, g := range groups {
			require.Len(t, g.msgs, perDelivery)
			for _, m := range g.msgs {
				leased = append(leased, m.ID)
			}
		}
	}
	rows, err := pool.Query(ctx, `SELECT id FROM switchyard.outbox ORDER BY id LIMIT $1`, claims*deliveries*perDelivery)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	slices.Sort(leased)
	require.Equal(t, ids, leased, "the first messages due leased, each once")

	statements, generic, custom := claimStatements(t, d, "OutboxClaimUnordered")
	require.Equal(t, 1, statements)
	require.Zero(t, custom, "never planned for its arguments")
	require.GreaterOrEqual(t, generic, claims, "its generic plan run at each execution")
	plan := preparedPlan(t, d, "OutboxClaimUnordered", `('{alpha}', NULL, '{alpha}', '{2026-12-04 12:00:00+00}', '{42}', '{500}', 500, 'w', 30)`)
	require.Contains(t, plan, "Index Scan using outbox_due_unordered", plan)
	// Retries leased one by one, each through an index of its id; first
	// tries leased in a stretch, their rows not written.
	require.Regexp(t, `Index Scan using outbox_(pkey|pending_id) on outbox o_\d+\s.*\n\s*Index Cond: \(id = ANY`, plan, "each retry leased through its key: %s", plan)
	require.Contains(t, plan, "Insert on outbox_stretches", plan)
	require.NotContains(t, plan, "Seq Scan on outbox ", plan)
}

// Over many aggregates, few of them due, the ordered claim runs on its
// generic plan (runClaim), which leases the aggregates it chose through
// their key. Its LIMITs were all parameters, which a generic plan takes
// to pass a tenth of their input: over 30,000 aggregates it expected some
// 300 to lease and hashed the whole table to find them, PostgreSQL
// estimated it dearer than any plan for the arguments, and planned every
// claim anew (BENCHMARKS.md, "The ordered claim's generic plan over many
// aggregates"); forced, it would have read the whole table at every
// claim.
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

	const rounds = 8 // more than the five plans for their arguments PostgreSQL would make first
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
	statements, generic, custom := claimStatements(t, d, "OutboxClaimOrdered")
	require.Equal(t, 1, statements)
	require.Equal(t, []int{rounds, 0}, []int{generic, custom}, "the generic plan run at every execution")
	ordered := preparedPlan(t, d, "OutboxClaimOrdered", `('{alpha}', NULL, '{10}', 10, 'w', 30, 32, '{2026-12-04 12:00:00+00}', '{42}')`)
	require.Regexp(t, `Index Scan (using|on) outbox_aggregates_pkey`, ordered, "the aggregates are leased through their key (probes or a bitmap of them): %s", ordered)
	require.NotContains(t, ordered, "Seq Scan on outbox_aggregates", ordered)
}

// Claims planned at a quiet moment still read only what they claim. When
// autovacuum describes the outbox while nothing is pending, the pending
// messages' indexes a page each, a plan that reads every pending message
// through outbox_pending_id is estimated cheapest, and the claims keep
// their plans as long as those statistics: as a backlog grew under such
// plans, each ordered claim read all pending messages once per aggregate
// it leased and once per head, took up to 1.6 s, and held up the enqueues
// to its aggregates as long (BENCHMARKS.md, "A quiet machine: ...; the
// ordered claim's plan made while few messages were pending"). Their
// plans reach the pending messages only through the indexes that lead to
// the rows they take: the unordered messages due, an aggregate's pending
// messages, and the ids of those.
func TestClaimsPlannedWhileNothingWasPendingReadOnlyWhatTheyClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, d := claimingSession(t)
	// Messages of both kinds, all delivered, described, and the indexes as
	// small as the few messages pending at a time leave them.
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload)
		SELECT 't', 'alpha', CASE WHEN k % 2 = 0 THEN 'order' ELSE '' END, CASE WHEN k % 2 = 0 THEN (k % 100)::text ELSE '' END, '{}'
		FROM generate_series(1, $1::int) AS k`, 2*planStatisticsFloor)
	require.NoError(t, err)
	for _, statement := range []string{
		`UPDATE switchyard.outbox SET state = 'delivered', finished_at = now()`,
		`UPDATE switchyard.outbox_aggregates SET done_seq = last_seq`,
	} {
		_, err := pool.Exec(ctx, statement)
		require.NoError(t, err, statement)
	}
	// VACUUM keeps what a snapshot open elsewhere on the server may still
	// see (describeForPreparedClaims), and REINDEX the entries of those
	// rows: again until the pending ids' index is its two pages.
	testwait.UntilEvery(t, time.Minute, 50*time.Millisecond, "the pending ids' index empty", func() bool {
		for _, statement := range []string{`VACUUM switchyard.outbox`, `REINDEX INDEX switchyard.outbox_pending_id`, `REINDEX INDEX switchyard.outbox_pending_ordered`, `REINDEX INDEX switchyard.outbox_due_unordered`} {
			_, err := pool.Exec(ctx, statement)
			require.NoError(t, err, statement)
		}
		var small bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT pg_relation_size('switchyard.outbox_pending_id') <= 2 * 8192`).Scan(&small))
		return small
	})
	describeForPreparedClaims(t, pool)
	var pending float64
	require.NoError(t, pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE relname = 'outbox_pending_id'`).Scan(&pending))
	require.Zero(t, pending, "the statistics say nothing is pending")
	d.heartbeat(ctx)
	require.NotEqual(t, claimPlanned, d.claimModeNow(), "the claims are prepared statements")

	// Then a message of each kind, each claimed, so that both claims are
	// prepared and planned; and a backlog behind them.
	enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)},
		Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: "first", Payload: []byte(`{}`)})
	groups, err := d.claim(ctx, "w", 10, nil)
	require.NoError(t, err)
	require.Len(t, groups, 2, "one delivery of each kind")
	enqueue(t, pool, mixedMessages(2000, 100)...)

	for _, claim := range []struct {
		name, args string
		reads      []string // the indexes its plan must read
	}{
		{"OutboxClaimUnordered", `('{alpha}', NULL, '{alpha}', '{2026-12-04 12:00:00+00}', '{42}', '{500}', 500, 'w', 30)`,
			[]string{"outbox_due_unordered", "outbox_aggregates_due"}},
		{"OutboxClaimOrdered", `('{alpha}', NULL, '{10}', 10, 'w', 30, 32, '{2026-12-04 12:00:00+00}', '{42}')`,
			[]string{"outbox_aggregates_due", "outbox_pending_ordered", "outbox_due_unordered"}},
	} {
		plan := preparedPlan(t, d, claim.name, claim.args)
		for _, index := range claim.reads {
			require.Regexp(t, `Scan (using|on) `+index+`\b`, plan, "%s reads %s: %s", claim.name, index, plan)
		}
		require.NotContains(t, plan, "Seq Scan on outbox ", plan)
		for _, read := range regexp.MustCompile(`Scan (?:using|on) outbox_pending_id\b.*\n\s*(.*)`).FindAllStringSubmatch(plan, -1) {
			require.True(t, strings.HasPrefix(read[1], "Index Cond: (id = ANY"),
				"%s reads outbox_pending_id only for the ids it has: %s", claim.name, plan)
		}
		require.NotContains(t, plan, "Sort", "%s reads its indexes in their order: %s", claim.name, plan)
	}

	// Run, the ordered claim reads what it takes once: the messages of the
	// aggregates it leases (heads) are scanned once each time they are
	// used, never once per head, as a nested loop that joined the heads'
	// updates to all of them did (BENCHMARKS.md, "The retained drain's
	// claims: heads read once per head").
	run := preparedPlanRun(t, d, "OutboxClaimOrdered", `('{alpha}', NULL, '{10}', 10, 'w', 30, 32, '{2026-12-04 12:00:00+00}', '{42}')`)
	require.Regexp(t, `Update on outbox .*actual rows=10 loops=1`, run, "ten heads written: %s", run)
	scans := regexp.MustCompile(`CTE Scan on heads\b.*actual rows=\d+ loops=(\d+)`).FindAllStringSubmatch(run, -1)
	require.NotEmpty(t, scans, run)
	for _, scan := range scans {
		require.Equal(t, "1", scan[1], "the claim's messages read once per use: %s", run)
	}
}

// An ordered claim statement leases at most orderedClaimMost aggregates of
// one destination, the constant in its SQL, whatever cap it is given; the
// dispatcher gives it no more, and says the destination was capped: more
// may be due there, and the worker's next finalize claims again instead of
// waiting for its idle poll.
func TestAnOrderedClaimTakesAtMostItsConstantOfADestination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), BatchSize: 2 * orderedClaimMost, LeaseDuration: time.Hour,
		Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	due := orderedClaimMost + 20
	msgs := make([]Message, due)
	for i := range msgs {
		msgs[i] = Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: strconv.Itoa(i), Payload: []byte(`{}`)}
	}
	enqueue(t, pool, msgs...)

	// The statement itself, asked for more (in a transaction rolled back).
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	rows, err := queries.New(tx).OutboxClaimOrdered(ctx, queries.OutboxClaimOrderedParams{Owner: "w", LeaseSeconds: 30,
		Destinations: []string{"alpha"}, Caps: []int32{int32(due)}, Aggregates: int32(due), PerAggregate: 32,
		AfterAt: []time.Time{{}}, AfterID: []int64{0}})
	require.NoError(t, err)
	require.Len(t, rows, orderedClaimMost, "the SQL's constant is orderedClaimMost")
	require.NoError(t, tx.Rollback(ctx))

	claimed, capped, err := d.claimPaced(ctx, claimRequest{worker: "w", limit: 2 * orderedClaimMost, held: map[string]int{}})
	require.NoError(t, err)
	require.Len(t, claimed, orderedClaimMost, "one claim's aggregates of alpha")
	require.True(t, capped, "alpha had more due than the claim could take")
	claimed, _, err = d.claimPaced(ctx, claimRequest{worker: "w", limit: 2 * orderedClaimMost, held: map[string]int{"alpha": orderedClaimMost}})
	require.NoError(t, err)
	require.Len(t, claimed, due-orderedClaimMost, "the next claim takes the rest")
}

// A destination's unordered messages never use up its aggregates' share of
// a claim, however large the window: the constant bounds the ordered
// statement, not the destination's cap, which the unordered deliveries
// also count against.
func TestUnorderedMessagesLeaveALargeWindowsAggregatesTheirShare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	const window = 4 * orderedClaimMost
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), BatchSize: window, LeaseDuration: time.Hour,
		Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	msgs := make([]Message, 0, window+3)
	for range window {
		msgs = append(msgs, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)})
	}
	for i := range 3 {
		msgs = append(msgs, Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: strconv.Itoa(i), Payload: []byte(`{}`)})
	}
	enqueue(t, pool, msgs...)

	claimed, err := d.claim(ctx, "w", window, nil)
	require.NoError(t, err)
	aggregates := 0
	for _, g := range claimed {
		if g.msgs[0].AggregateID != "" {
			aggregates++
		}
	}
	require.Equal(t, 3, aggregates, "every aggregate leased beside the window's unordered messages")
	require.Equal(t, window, len(claimed), "unordered messages in the rest of the window")
}

// A claim whose commit fails leases nothing and hands nothing on, planned
// for its arguments or on its generic plan on the claims' own connections,
// and of either kind: one autocommitted statement each time, whose rows are
// returned only once the server has answered its commit. A deferred
// trigger refuses the commit of any transaction that updated the outbox
// or its aggregates, or made a stretch.
func TestAClaimWhoseCommitFailsHandsNothingOn(t *testing.T) {
	t.Parallel()
	for _, prepared := range []bool{false, true} {
		for _, aggregate := range []string{"", "order-1"} {
			t.Run(fmt.Sprintf("prepared=%v,aggregate=%q", prepared, aggregate), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				pool, d := claimingSession(t)
				msg := Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)}
				if aggregate != "" {
					msg.AggregateType, msg.AggregateID = "order", aggregate
				}
				enqueue(t, pool, msg, msg)
				if prepared {
					_, err := pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, state, finished_at)
						SELECT 't', 'alpha', '{}', 'delivered', now() FROM generate_series(1, $1::int)`, planStatisticsFloor)
					require.NoError(t, err)
				}
				d.heartbeat(ctx)
				want := claimPlanned
				if prepared {
					want = claimPrepared
				}
				require.Equal(t, want, d.claimModeNow())
				_, err := pool.Exec(ctx, `CREATE FUNCTION public.refuse_commit() RETURNS trigger LANGUAGE plpgsql AS $$
						BEGIN RAISE EXCEPTION 'commit refused'; END $$;
					CREATE CONSTRAINT TRIGGER refuse_commit AFTER UPDATE ON switchyard.outbox
						DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.refuse_commit();
					CREATE CONSTRAINT TRIGGER refuse_commit AFTER UPDATE ON switchyard.outbox_aggregates
						DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.refuse_commit();
					CREATE CONSTRAINT TRIGGER refuse_commit AFTER INSERT ON switchyard.outbox_stretches
						DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.refuse_commit()`)
				require.NoError(t, err)

				groups, err := d.claim(ctx, "w", 10, nil)
				require.ErrorContains(t, err, "commit refused")
				require.Empty(t, groups, "nothing handed on")
				require.Equal(t, 2, countWhere(t, pool, "state = 'pending' AND lease_owner IS NULL AND lease_version = 0 AND attempts = 0"),
					"both messages as they were")
				var leased int
				require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox_aggregates
					WHERE lease_owner IS NOT NULL OR lease_version <> 0`).Scan(&leased))
				require.Zero(t, leased, "no aggregate leased")
				require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox_stretches`).Scan(&leased))
				require.Zero(t, leased, "no stretch")
			})
		}
	}
}
