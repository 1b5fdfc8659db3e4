package outbox

import (
	"context"
	"errors"
	"fmt"
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

// sendGeneric runs, in one round trip, a finalize's transaction whose
// statements run on their generic plans: BEGIN, the SET (plan_cache_mode =
// force_generic_plan, for that transaction only), the statements that
// queue adds, and COMMIT; read reads the statements' results in order,
// and the error, if any, is the first of theirs or COMMIT's, so that a
// finalize is reported done only once it is committed. Nothing is sent if
// queue fails.
//
// Each statement is a prepared statement planned once, without its
// arguments, whatever PostgreSQL would choose. Left to choose, PostgreSQL
// plans a prepared statement for its arguments as long as that plan is
// estimated cheaper than the generic one, and a small finalize's was, by a
// little, once the outbox had statistics: under offered load the finalize,
// with a few messages each time, was planned anew at almost every
// execution, about 2 ms each (3.8 s of planning in 15 s at 1,000 messages
// a second; BENCHMARKS.md, "Fewer statements per offered message").
//
// BEGIN, the SET, the statements and COMMIT go in one round trip, a
// pipeline (pgx.Batch): sent one after another they were three round
// trips, each a wake-up of the server's backend and of the worker
// (BENCHMARKS.md, "The small finalize in one round trip"). They are
// transaction control, not queries, so they are written here and not in
// internal/queries. If a statement fails, the server skips the rest up to
// the pipeline's end and the transaction is left failed: the pool closes
// a connection it gets back in a transaction, which is why this takes a
// pool, never a connection or a transaction. The whole pipeline is sent
// before any result is read, so a failure on this side after that (the
// context's deadline while reading) is reported as an error although the
// server may have committed: a delivery seen again, at least once, and
// the fencing holds.
func sendGeneric(ctx context.Context, pool *pgxpool.Pool, queue func(*pgx.Batch) error, read func(pgx.BatchResults) error) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(genericPlans)
	if err := queue(b); err != nil {
		return err
	}
	b.Queue("COMMIT")
	results := pool.SendBatch(ctx, b)
	for range 2 { // BEGIN, SET
		if _, err := results.Exec(); err != nil {
			return closeAfter(err, results)
		}
	}
	if err := read(results); err != nil {
		return closeAfter(err, results)
	}
	if _, err := results.Exec(); err != nil { // COMMIT
		return closeAfter(err, results)
	}
	return results.Close()
}

// genericPlans makes each statement of a transaction run on its generic
// plan (sendGeneric).
const genericPlans = "SET LOCAL plan_cache_mode = force_generic_plan"

// claimSettings are the settings of the claims' own connections
// (claimPool), made when each connects: the claims' prepared statements
// on their generic plans, and no plan that sorts. The claims' plans read
// each index in the order it keeps (the aggregates due, an aggregate's
// pending messages, the unordered messages due) and sort nothing; the one
// other way to their rows is to read every pending message through
// outbox_pending_id and sort them, which a plan made while the statistics
// said no message was pending estimated cheaper. Kept as long as the
// statistics, that plan read all the pending messages once per leased
// aggregate and once more for each claim's probe as a backlog grew, each
// ordered claim took up to 1.6 s, and the enqueues waited behind its
// locks on their aggregates (BENCHMARKS.md, "A quiet machine: ...; the
// ordered claim's plan made while few messages were pending"). A sort can
// still run where it is the only way; it is no longer chosen over a read
// of an index in order.
//
// A SET on each new session, not startup parameters, which poolers such
// as PgBouncer refuse (internal/postgres sets jit the same way).
const claimSettings = "SET plan_cache_mode = force_generic_plan; SET enable_sort = off"

// claimSessionKey marks, in a connection's CustomData, a connection of a
// claims' pool, its session under claimSettings.
const claimSessionKey = "switchyard.outbox.claims"

// claimConnections is how many connections the claims' pool holds: one
// for each kind's turn (Dispatcher.unorderedTurn, orderedTurn), the most
// claims of a dispatcher in flight at once.
const claimConnections = 2

// claimPool is the pool the dispatcher's prepared claims run on, made
// from its own pool's configuration at the first such claim: connections
// of their own, each with claimSettings for its whole session, so that
// each claim is one autocommitted statement. With the settings made for
// each claim's transaction instead (SET LOCAL), each claim was five
// statements (BEGIN, two SETs, the claim and COMMIT), measured at 12 %
// more of the server's CPU per message at 1,000 messages a second on one
// machine (BENCHMARKS.md, "A quiet machine: ...") and not told apart on
// another ("The claims' settings on connections of their own"). Its two
// connections are kept open (MinIdleConns), as openConnections opens
// them: a claim never waits for one to be made. They are beside the
// dispatcher's pool's, not counted in its MaxConns. It is closed when the
// dispatcher stops (closeClaimPool).
func (d *Dispatcher) claimPool() (*pgxpool.Pool, error) {
	d.claimsMu.Lock()
	defer d.claimsMu.Unlock()
	if d.claims != nil {
		return d.claims, nil
	}
	cfg := d.pool.Config()
	cfg.MaxConns, cfg.MinConns, cfg.MinIdleConns = claimConnections, 0, claimConnections
	afterConnect := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if afterConnect != nil {
			if err := afterConnect(ctx, conn); err != nil {
				return err
			}
		}
		if _, err := conn.Exec(ctx, claimSettings, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("the claims' settings: %w", err)
		}
		conn.PgConn().CustomData()[claimSessionKey] = true
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("the claims' pool: %w", err)
	}
	d.claims = pool
	return pool, nil
}

// closeClaimPool closes the claims' pool, if a claim made it; a later
// claim makes another.
func (d *Dispatcher) closeClaimPool() {
	d.claimsMu.Lock()
	defer d.claimsMu.Unlock()
	if d.claims != nil {
		d.claims.Close()
		d.claims = nil
	}
}

// errQueued is what a generated query returns through queueing: its
// statement was queued, not run.
var errQueued = errors.New("statement queued in a pipeline, not run")

// queueing is a queries.DBTX whose Query queues the statement in batch
// instead of running it, so that several runs of a generated query go out
// in one pipeline with their SQL and arguments exactly as the generated
// code passes them; the generated function then returns errQueued.
// nextResult reads their results in the same order. Only Query is for use:
// the embedded DBTX is nil.
type queueing struct {
	queries.DBTX
	batch *pgx.Batch
}

func (q queueing) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	q.batch.Queue(sql, args...)
	return nil, errQueued
}

// nextResult is a queries.DBTX whose Query returns the rows of the next
// statement of a pipeline that was sent (results), whatever it is given:
// the generated function that queued that statement (queueing) reads them.
// Only Query is for use: the embedded DBTX is nil.
type nextResult struct {
	queries.DBTX
	results pgx.BatchResults
}

func (n nextResult) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return n.results.Query()
}

// closeAfter closes results after err and returns err: what Close reports
// then is err again.
func closeAfter(err error, results pgx.BatchResults) error {
	_ = results.Close()
	return err
}

// planStatisticsFloor is how many rows the planner's statistics of each
// table a claim reads must describe (pg_class.reltuples, which ANALYZE and
// VACUUM set) before the claim is sent as a prepared statement, whose
// generic plan PostgreSQL may keep.
//
// The claims are written so that their generic plans are estimated below
// their custom ones (an unnest of the destinations, which a generic plan
// takes for ten rows, where a generate_series over them was taken for a
// thousand), and they run on them whatever PostgreSQL would choose
// (runClaim): planning every claim anew cost more than running it at
// 1,000 messages/s (BENCHMARKS.md, "Claims that keep their generic
// plan"). But a generic plan is made once, from the statistics of that
// moment, and kept until they change: made on a new, empty outbox it
// reads the outbox sequentially, and went on doing so, a claim costing as
// much as the table was big, until autovacuum analyzed the table. From a
// thousand rows on, the generic plans read the indexes
// (TestClaimsKeepAGenericPlanOnlyOnceTheirTablesHaveStatistics checks
// them); they are dropped when the statistics change, by ANALYZE or
// VACUUM.
const planStatisticsFloor = 1000

// smallAggregatesTable is the size (8 pages) up to which the claims (the
// ordered claim, and the unordered claim's probe of the aggregates due)
// are prepared statements whatever the aggregates' statistics: a generic
// plan that reads the table sequentially reads next to nothing. Where
// every message is unordered the table stays empty, its statistics never
// reach the floor, and every ordered claim, each finding nothing, was
// planned anew: at 1,000 messages a second, 2 to 3 s of the server's time
// in 10 s, more than the claims' own execution (BENCHMARKS.md, "Latency
// beside River under offered load"). When the table grows past this, the
// next heartbeat (readPlanStatistics) sends the claims to be planned for
// their arguments again until ANALYZE has described the table: a generic
// plan made while it was small is used a heartbeat at most after that.
const smallAggregatesTable = 8 * 8192

// claimStatistics is what the claims' tables were like, as last read
// (readPlanStatistics): whether the planner's statistics of each are past
// planStatisticsFloor, and whether the aggregates' table is small.
// claimedSince counts the messages claimed since then while a claim was
// planned for its arguments (noteClaimed).
type claimStatistics struct {
	outbox          atomic.Bool
	aggregates      atomic.Bool
	aggregatesSmall atomic.Bool
	claimedSince    atomic.Int64
}

// planned reports whether the claims are planned for their arguments (see
// claimModeNow): a table they read has statistics below the floor.
func (s *claimStatistics) planned() bool {
	return !s.outbox.Load() || !(s.aggregates.Load() || s.aggregatesSmall.Load())
}

// readPlanStatistics reads the claims' tables' statistics (with each
// heartbeat, and when noteClaimed asks). A table whose statistics are
// below planStatisticsFloor while it holds at least that many rows is
// described at once (ANALYZE), where the dispatcher may: autovacuum
// analyzes a new table only at its next round, up to a minute later (its
// naptime), and until then every claim on a new outbox was planned anew,
// a millisecond and a half of the server's time each, more than the claim
// itself (BENCHMARKS.md, "Planned claims on a new outbox"). A failure is
// logged and keeps what was read before: the claims stay correct either
// way, only their planning costs more.
func (d *Dispatcher) readPlanStatistics(ctx context.Context) {
	// Counted from now on, whatever this read finds: a read that fails
	// is not asked for again at every claim.
	d.stats.claimedSince.Store(0)
	q := queries.New(d.pool)
	s, err := q.OutboxPlanStatistics(ctx, planStatisticsFloor)
	if err == nil && s.MayAnalyze {
		grownOutbox := s.Outbox < planStatisticsFloor && s.OutboxRows >= planStatisticsFloor
		grownAggregates := s.Aggregates < planStatisticsFloor && s.AggregatesRows >= planStatisticsFloor
		if grownOutbox {
			err = q.OutboxAnalyze(ctx)
		}
		if grownAggregates && err == nil {
			err = q.OutboxAggregatesAnalyze(ctx)
		}
		if (grownOutbox || grownAggregates) && err == nil {
			s, err = q.OutboxPlanStatistics(ctx, planStatisticsFloor)
		}
	}
	if err != nil {
		d.cfg.Logger.Warn("reading the outbox's planner statistics failed", slog.Any("error", err))
		return
	}
	d.stats.outbox.Store(s.Outbox >= planStatisticsFloor)
	d.stats.aggregates.Store(s.Aggregates >= planStatisticsFloor)
	d.stats.aggregatesSmall.Store(s.AggregatesBytes <= smallAggregatesTable)
}

// noteClaimed counts n messages claimed. While the claims are planned for
// their arguments, every planStatisticsFloor messages claimed ask the
// heartbeat loop to read the statistics again before its next beat: the
// tables may have grown enough to be described (readPlanStatistics).
func (d *Dispatcher) noteClaimed(n int) {
	if n == 0 || !d.stats.planned() {
		return
	}
	if d.stats.claimedSince.Add(int64(n)) < planStatisticsFloor {
		return
	}
	select {
	case d.statisticsDue <- struct{}{}:
	default: // asked already
	}
}

// claimMode is how a claim is sent, by what the planner's statistics of
// the tables it reads say (claimModeNow).
type claimMode int

const (
	// claimPlanned: planned for its arguments (customPlans), while a table
	// the claim reads has statistics below planStatisticsFloor.
	claimPlanned claimMode = iota
	// claimPrepared: a prepared statement, run on its generic plan
	// (runClaim).
	claimPrepared
)

// claimModeNow is how a claim, which reads the outbox and the aggregates
// (each claim probes the other kind's table: OutboxClaimUnordered's
// aggregates_due), is sent: as a prepared statement once their
// statistics are past planStatisticsFloor (or the aggregates' table is
// small), planned for its arguments until then.
//
// A prepared claim is one statement whether the aggregates' table is
// small or described. Until its generic plan was forced (claimSettings),
// it was a statement of its own while the table was small: PostgreSQL
// keeps a generic plan only while it is estimated no dearer than the
// statement's custom plans so far, and the cheap custom plans of a small
// table kept the dearer generic plan of the grown table from being used.
// Forced, the generic plan is made from the statistics of the moment, and
// made again when ANALYZE or VACUUM changes them (the claims are planned
// for their arguments from the table's growth past small until then).
func (d *Dispatcher) claimModeNow() claimMode {
	if d.stats.planned() {
		return claimPlanned
	}
	return claimPrepared
}

// runClaim runs a claim (claim, a generated query, with p) as
// claimModeNow says: a prepared one on the claims' own connections
// (claimPool), one autocommitted statement on its generic plan whatever
// PostgreSQL would choose. PostgreSQL keeps a generic plan only while it
// is estimated no dearer than the plans for the arguments so far, and the
// unordered claim's LIMITs are parameters, which a generic plan takes to
// pass a tenth of what is due: under a backlog, where a claim leases
// hundreds of messages, its generic plan (the same reads of the same
// indexes) was estimated at twice a plan for the arguments, and every
// claim of a drain was planned anew while it held the dispatcher's
// unordered turn (BENCHMARKS.md, "What an unordered drain waits on, and
// the unordered claim on its generic plan"). The ordered claim, whose
// LIMIT is a constant, kept its generic plan unforced, after five plans
// for its arguments on each connection; it runs there for the settings'
// second half.
//
// The claim's rows are handed on only once it has committed: pgx reads
// an autocommitted statement's result up to the server's ReadyForQuery,
// which follows its commit, before the generated code returns its rows,
// and reports an error that came after them (a commit that failed).
func runClaim[P, R any](ctx context.Context, d *Dispatcher, claim func(*queries.Queries, context.Context, P) ([]R, error), p P) ([]R, error) {
	if d.claimModeNow() == claimPlanned {
		return claim(queries.New(customPlans{d.pool}), ctx, p)
	}
	pool, err := d.claimPool()
	if err != nil {
		return nil, err
	}
	return claim(queries.New(pool), ctx, p)
}
