package outbox

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
)

// customPlans sends every statement run through its Exec, Query and
// QueryRow to be planned for its own arguments (CopyFrom and SendBatch go
// through as they are).
//
// pgx prepares and caches each statement, and after five executions
// PostgreSQL may keep a prepared statement's generic plan, made without
// its arguments: it takes an array argument to hold ten elements. The
// finalize unnests arrays of up to 1,000 messages and names their ids;
// with a million delivered messages retained beside a backlog, its
// generic plan expected one message to update and joined the input to it
// by rescanning the whole input for every message (530 of a 1,024-message
// finalize's 560 ms; the drain ran at a fifth of its rate on an empty
// outbox).
// pgx.QueryExecModeCacheDescribe sends the statement unnamed, which
// PostgreSQL plans anew with the arguments; it still takes one round
// trip, since pgx caches the statement's description. Planning costs
// about 2 ms per statement, so a small finalize stays a prepared statement
// (genericPlanMost).
type customPlans struct{ queries.DBTX }

func (c customPlans) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return c.DBTX.Exec(ctx, sql, withCustomPlan(args)...)
}

func (c customPlans) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return c.DBTX.Query(ctx, sql, withCustomPlan(args)...)
}

func (c customPlans) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return c.DBTX.QueryRow(ctx, sql, withCustomPlan(args)...)
}

func withCustomPlan(args []any) []any {
	return append([]any{pgx.QueryExecModeCacheDescribe}, args...)
}

// withGenericPlans runs fn's statements in a transaction of their own,
// as prepared statements planned once, without their arguments, whatever
// PostgreSQL would choose (plan_cache_mode = force_generic_plan, for that
// transaction only).
//
// Left to choose, PostgreSQL plans a prepared statement for its arguments
// as long as that plan is estimated cheaper than the generic one, and a
// small finalize's was, by a little, once the outbox had statistics: under
// offered load the finalize, with a few messages each time, was planned
// anew at almost every execution, about 2 ms each (3.8 s of planning in
// 15 s at 1,000 messages a second; BENCHMARKS.md, "Fewer statements per
// offered message").
// BEGIN and the SET go in one round trip.
func withGenericPlans(ctx context.Context, pool *pgxpool.Pool, fn func(queries.DBTX) error) error {
	return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan"},
		func(tx pgx.Tx) error { return fn(tx) })
}

// planStatisticsFloor is how many rows the planner's statistics of each
// table a claim reads must describe (pg_class.reltuples, which ANALYZE and
// VACUUM set) before the claim is sent as a prepared statement, whose
// generic plan PostgreSQL may keep.
//
// The claims are written so that their generic plans are estimated below
// their custom ones (an unnest of the destinations, which a generic plan
// takes for ten rows, where a generate_series over them was taken for a
// thousand), and PostgreSQL keeps them: planning every claim anew cost
// more than running it at 1,000 messages/s (BENCHMARKS.md, "Claims that
// keep their generic plan"). But a generic plan is made once, from the
// statistics of that moment, and kept until they change: made on a new,
// empty outbox it reads the outbox sequentially, and went on doing so, a
// claim costing as much as the table was big, until autovacuum analyzed
// the table. From a thousand rows on, the generic plans read the indexes
// (TestClaimsKeepAGenericPlanOnlyOnceTheirTablesHaveStatistics checks
// them); they are dropped when the statistics change, by ANALYZE or
// VACUUM.
const planStatisticsFloor = 1000

// claimStatistics is whether the planner's statistics of the claims'
// tables are past planStatisticsFloor, as last read (readPlanStatistics).
type claimStatistics struct {
	outbox     atomic.Bool
	aggregates atomic.Bool
}

// readPlanStatistics reads the claims' tables' statistics (with each
// heartbeat). A failure is logged and keeps what was read before: the
// claims stay correct either way, only their planning costs more.
func (d *Dispatcher) readPlanStatistics(ctx context.Context) {
	s, err := queries.New(d.pool).OutboxPlanStatistics(ctx)
	if err != nil {
		d.cfg.Logger.Warn("reading the outbox's planner statistics failed", slog.Any("error", err))
		return
	}
	d.stats.outbox.Store(s.Outbox >= planStatisticsFloor)
	d.stats.aggregates.Store(s.Aggregates >= planStatisticsFloor)
}

// claimQueries runs a claim that reads the outbox, and the aggregates too
// if withAggregates: as a prepared statement once their statistics are
// past planStatisticsFloor, planned for its arguments until then.
func (d *Dispatcher) claimQueries(withAggregates bool) *queries.Queries {
	if d.stats.outbox.Load() && (!withAggregates || d.stats.aggregates.Load()) {
		return queries.New(d.pool)
	}
	return queries.New(customPlans{d.pool})
}
