package outbox

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/destination/guard"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/testlog"
	"github.com/switchyard/switchyard/internal/testwait"
)

// claimOverlap is a pgx QueryTracer and BatchTracer (a pool's
// ConnConfig.Tracer) that counts each kind of claim in flight, and the
// most of it there ever were at once. Each claim is held back 5 ms before
// it is sent: not a wait for anything, only a window wide enough that
// claims sent side by side overlap in it on any machine (the workers'
// first claims all go at the dispatcher's start).
type claimOverlap struct {
	mu       sync.Mutex
	inFlight map[string]int
	most     map[string]int
	sent     map[string]int
	// prepared counts, of sent, the claims sent on the claims' own
	// connections (claimPool: runClaim, a prepared claim).
	prepared map[string]int
}

type claimKindKey struct{}

// claimKinds are the statements claimOverlap counts, by the name sqlc
// puts in their first line.
var claimKinds = []string{"OutboxClaimUnordered", "OutboxClaimOrdered"}

func newClaimOverlap() *claimOverlap {
	return &claimOverlap{inFlight: map[string]int{}, most: map[string]int{}, sent: map[string]int{}, prepared: map[string]int{}}
}

// claimCountingPool is a pool of a test database of its own, with
// destinations, whose claims a claimOverlap counts.
func claimCountingPool(t *testing.T, destinations ...string) (*pgxpool.Pool, *claimOverlap) {
	t.Helper()
	conf, err := pgxpool.ParseConfig(dbtest.NewURL(t))
	require.NoError(t, err)
	sent := newClaimOverlap()
	conf.ConnConfig.Tracer = sent
	pool, err := pgxpool.NewWithConfig(context.Background(), conf)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	addDestinations(t, pool, destinations...)
	return pool, sent
}

// statements is how many claim statements of each kind were sent so far.
func (c *claimOverlap) statements() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.sent)
}

func (c *claimOverlap) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if onClaimSession(conn) {
		return c.start(ctx, data.SQL, c.sent, c.prepared)
	}
	return c.start(ctx, data.SQL, c.sent)
}

func (c *claimOverlap) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	c.end(ctx)
}

// onClaimSession says whether conn is a claims' pool's (claimPool).
func onClaimSession(conn *pgx.Conn) bool {
	return conn.PgConn().CustomData()[claimSessionKey] == true
}

// A pipeline with a claim in it is counted as its claim, from its start
// to its end.
func (c *claimOverlap) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	counts := []map[string]int{c.sent}
	if onClaimSession(conn) {
		counts = append(counts, c.prepared)
	}
	for _, q := range data.Batch.QueuedQueries {
		if claimed := c.start(ctx, q.SQL, counts...); claimed != ctx {
			return claimed
		}
	}
	return ctx
}

func (c *claimOverlap) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (c *claimOverlap) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	c.end(ctx)
}

// start counts sql in flight, if it is a claim, and in each of counts,
// and holds it back 5 ms; the context it returns says which claim it
// was, for end.
func (c *claimOverlap) start(ctx context.Context, sql string, counts ...map[string]int) context.Context {
	for _, kind := range claimKinds {
		if strings.Contains(sql, "-- name: "+kind+" ") {
			c.mu.Lock()
			c.inFlight[kind]++
			for _, n := range counts {
				n[kind]++
			}
			c.most[kind] = max(c.most[kind], c.inFlight[kind])
			c.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			return context.WithValue(ctx, claimKindKey{}, &tracedClaim{kind: kind})
		}
	}
	return ctx
}

// tracedClaim is a claim in flight, as start saw it.
type tracedClaim struct {
	kind  string
	ended sync.Once
}

// end counts the claim that start saw in ctx, if any, landed, once: pgx
// ends the trace of a batch that failed before it was sent twice.
func (c *claimOverlap) end(ctx context.Context) {
	if claim, ok := ctx.Value(claimKindKey{}).(*tracedClaim); ok {
		claim.ended.Do(func() {
			c.mu.Lock()
			c.inFlight[claim.kind]--
			c.mu.Unlock()
		})
	}
}

// preparedClaims is how many claim statements of each kind were sent on
// the claims' own connections so far.
func (c *claimOverlap) preparedClaims() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.prepared)
}

// A dispatcher's claims of one kind take turns: claims sent side by side
// would read the same rows first and step over each other's locked rows
// (Dispatcher.unorderedTurn, orderedTurn). Every message is still
// delivered exactly once, in order within its aggregate.
func TestADispatchersClaimsOfOneKindTakeTurns(t *testing.T) {
	t.Parallel()
	const messages = 2000
	pool, overlap := claimCountingPool(t, "alpha")
	// Ten ordered messages in each of 100 aggregates.
	enqueue(t, pool, mixedMessages(messages, 100)...)
	// The claims prepared, as under a backlog.
	describeForPreparedClaims(t, pool)
	dest := newFlaky(0, 0)
	deliverAll(t, pool, dest, messages)

	overlap.mu.Lock()
	defer overlap.mu.Unlock()
	for _, kind := range claimKinds {
		require.Greater(t, overlap.sent[kind], 8, "the workers sent many claims of %s", kind)
		require.Equal(t, 1, overlap.most[kind], "no two claims of %s in flight at once", kind)
	}
	for _, kind := range claimKinds {
		require.Positive(t, overlap.prepared[kind], "claims of %s on the claims' connections", kind)
	}
	dest.mu.Lock()
	defer dest.mu.Unlock()
	require.Empty(t, dest.violations)
	require.Len(t, dest.delivered, messages)
	for id, n := range dest.delivered {
		require.Equal(t, 1, n, "message %s acknowledged more than once", id)
	}
}

// A worker waits for another's claim no longer than its own claim's
// context lets it, and a turn given back can be taken again.
func TestATurnIsWaitedForUnderTheClaimsContext(t *testing.T) {
	t.Parallel()
	turn := make(chan struct{}, 1)
	release, err := takeTurn(context.Background(), turn)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = takeTurn(ctx, turn)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the turn is held: the wait ends with the claim's deadline")
	release()
	again, err := takeTurn(context.Background(), turn)
	require.NoError(t, err, "a turn given back is free again")
	again()
}

// A claim sends the other kind's statement only where the first one's
// rows say that kind has something due, or where the first one leased
// nothing (and so said nothing): where producers enqueue one kind only,
// the other kind's statement found nothing at every wake-up. Whatever is
// skipped, each kind's messages are claimed by the claim after they are
// due.
func TestAClaimSendsTheOtherKindOnlyWhereItIsDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, sent := claimCountingPool(t, "alpha", "beta", "gamma")
	// Leases that outlast the test: a claim never takes an earlier step's
	// messages again.
	d := newDispatcher(t, pool, Config{LeaseDuration: time.Hour, Routes: map[string]Route{
		"alpha": {Destination: destination.Func(nil)}, "beta": {Destination: destination.Func(nil)},
		"gamma": {Destination: destination.Func(nil)}}})
	unordered := func(destination string, n int) []Message {
		msgs := make([]Message, n)
		for i := range msgs {
			msgs[i] = Message{Topic: "t", Destination: destination, Payload: []byte(`{}`)}
		}
		return msgs
	}
	ordered := func(destination, aggregate string, n int) []Message {
		msgs := unordered(destination, n)
		for i := range msgs {
			msgs[i].AggregateType, msgs[i].AggregateID = "order", aggregate
		}
		return msgs
	}
	// claimOf runs one claim of up to limit deliveries and returns how
	// many messages of each kind (by aggregate) it leased and how many
	// statements of each kind it sent.
	claimOf := func(limit int, orderedFirst bool) (leased, statements map[string]int) {
		t.Helper()
		before := sent.statements()
		groups, _, err := d.claimPaced(ctx, claimRequest{worker: "w", limit: limit, orderedFirst: orderedFirst})
		require.NoError(t, err)
		leased = map[string]int{}
		for _, g := range groups {
			for _, m := range g.msgs {
				leased[cmp.Or(m.AggregateID, "unordered")]++
			}
		}
		after := sent.statements()
		statements = map[string]int{}
		for _, kind := range claimKinds {
			statements[kind] = after[kind] - before[kind]
		}
		return leased, statements
	}
	claim := func(orderedFirst bool) (leased, statements map[string]int) {
		t.Helper()
		return claimOf(100, orderedFirst)
	}
	only := func(unordered, ordered int) map[string]int {
		return map[string]int{"OutboxClaimUnordered": unordered, "OutboxClaimOrdered": ordered}
	}

	// Claims one after another, each after its messages are enqueued.
	steps := []struct {
		why          string
		enqueue      []Message
		orderedFirst bool
		leased       map[string]int
		statements   map[string]int
	}{
		{"no aggregate is due: the ordered claim is not sent",
			unordered("alpha", 10), false, map[string]int{"unordered": 10}, only(1, 0)},
		{"an aggregate is due at another destination than the unordered messages found: the ordered claim is sent",
			append(ordered("beta", "b1", 3), unordered("alpha", 5)...), false, map[string]int{"unordered": 5, "b1": 3}, only(1, 1)},
		{"the unordered claim leased nothing, so said nothing: the ordered claim is sent",
			ordered("alpha", "a1", 2), false, map[string]int{"a1": 2}, only(1, 1)},
		{"the mirror image, the ordered claim first: no unordered message is due, the unordered claim is not sent",
			ordered("alpha", "a2", 4), true, map[string]int{"a2": 4}, only(0, 1)},
		{"unordered messages are due at another destination: the unordered claim is sent",
			append(ordered("alpha", "a3", 1), unordered("beta", 2)...), true, map[string]int{"a3": 1, "unordered": 2}, only(1, 1)},
	}
	for _, step := range steps {
		enqueue(t, pool, step.enqueue...)
		leased, statements := claim(step.orderedFirst)
		require.Equal(t, step.leased, leased, step.why)
		require.Equal(t, step.statements, statements, step.why)
	}

	// A message behind this dispatcher's mark (here a mark far ahead, as
	// if alpha's messages had been leased up to it: a message behind a
	// mark is one whose lease expired, or whose transaction committed
	// late) is not seen by the probe, as the unordered claim would not
	// see it; the marks are then forgotten as that claim, finding
	// nothing, would have forgotten them, and the next claim finds it.
	start := d.marks.start([]string{"alpha"}, time.Now())
	d.marks.claimed([]string{"alpha"}, []int32{1}, 1, start,
		[]queries.OutboxClaimUnorderedRow{{ID: 1 << 40, Destination: "alpha", NextAttemptAt: time.Now().Add(time.Hour)}}, time.Now())
	enqueue(t, pool, append(ordered("alpha", "a4", 1), unordered("alpha", 1)...)...)
	leased, statements := claim(true)
	require.Equal(t, map[string]int{"a4": 1}, leased, "the probe starts after the mark")
	require.Equal(t, only(0, 1), statements)
	enqueue(t, pool, ordered("alpha", "a5", 1)...)
	leased, statements = claim(true)
	require.Equal(t, map[string]int{"a5": 1, "unordered": 1}, leased, "the next claim starts at the head")
	require.Equal(t, only(1, 1), statements)

	// The probe covers every destination the ordered claim would serve,
	// not only those the unordered claim served: a claim of two
	// deliveries asks for one unordered message, at one destination,
	// first in the claim's random order (a third of the time gamma, with
	// no unordered message, and the ordered claim goes out regardless).
	for round := range 12 {
		aggregate := fmt.Sprint("g", round)
		enqueue(t, pool, unordered("alpha", 1)...)
		enqueue(t, pool, unordered("beta", 1)...)
		enqueue(t, pool, ordered("gamma", aggregate, 1)...)
		leased, _ := claimOf(2, false)
		require.Equal(t, 1, leased[aggregate], "round %d: gamma's aggregate was due and is leased: %v", round, leased)
		_, err := pool.Exec(ctx, `UPDATE switchyard.outbox SET state = 'delivered', finished_at = now() WHERE state = 'pending' AND aggregate_id = ''`)
		require.NoError(t, err)
	}
}

// At a destination whose share is smaller than half a claim (a guard's),
// the claim's first statement takes at most half of it, so that the other
// kind is leased there too: the unordered statement, first, took the whole
// share at every claim, and a backlog of unordered messages kept the
// destination's aggregates from ever being leased. Where the first kind
// leased all it was allowed, it is sent again for what the other kind
// left. Where the other kind was due there at none of the statements of
// the destination's last claim, the first kind keeps its whole share: a
// claim of one kind stays one statement.
func TestBothKindsAreLeasedAtADestinationWithASmallShare(t *testing.T) {
	t.Parallel()
	pool, sent := claimCountingPool(t, "narrow")
	narrow, err := guard.New("narrow", guard.Config{Concurrency: 2}, nil) // a share of 4 deliveries
	require.NoError(t, err)
	// Leases that outlast the test: a claim never takes an earlier one's
	// messages again.
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), BatchSize: 64, LeaseDuration: time.Hour,
		Routes: map[string]Route{"narrow": {Destination: destination.Func(nil), Guard: narrow}}})
	backlog(t, pool, "narrow", 20, 3)
	for _, step := range []struct {
		why          string
		orderedFirst bool
		want         [2]int // unordered deliveries, aggregates
		statements   int
	}{
		{"half the share each, the first kind's half first", false, [2]int{2, 2}, 2},
		{"the last aggregate, the rest to unordered messages, sent again for it", false, [2]int{3, 1}, 3},
		{"an aggregate was due at the last claim: half, then, none due now, the rest", false, [2]int{4, 0}, 2},
		{"none was due at the last claim: the whole share, one statement", false, [2]int{4, 0}, 1},
		{"ordered first, no aggregate due: the unordered messages have the rest", true, [2]int{4, 0}, 2},
	} {
		before := sent.statements()
		require.Equal(t, step.want, claimKindsAt(t, d, nil, step.orderedFirst, "narrow"), step.why)
		after := sent.statements()
		require.Equal(t, step.statements, after["OutboxClaimUnordered"]+after["OutboxClaimOrdered"]-
			before["OutboxClaimUnordered"]-before["OutboxClaimOrdered"], step.why)
	}
}

// Each destination is split by what was seen of it: aggregates due at
// another destination, which the rows' report of the other kind covers
// too, do not split the share of one where the ordered statement looked
// and found none, and only unordered messages wait.
func TestASplitFollowsEachDestinationsOwnTraffic(t *testing.T) {
	t.Parallel()
	pool, sent := claimCountingPool(t, "narrow", "other")
	narrow, err := guard.New("narrow", guard.Config{Concurrency: 2}, nil) // a share of 4 deliveries
	require.NoError(t, err)
	other, err := guard.New("other", guard.Config{Concurrency: 4}, nil) // a share of 8
	require.NoError(t, err)
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), BatchSize: 64, LeaseDuration: time.Hour, Routes: map[string]Route{
		"narrow": {Destination: destination.Func(nil), Guard: narrow}, "other": {Destination: destination.Func(nil), Guard: other}}})
	backlog(t, pool, "narrow", 20, 0)
	backlog(t, pool, "other", 0, 30) // more than one claim leases there
	statements := func() int {
		counts := sent.statements()
		return counts["OutboxClaimUnordered"] + counts["OutboxClaimOrdered"]
	}
	for _, want := range []struct {
		why        string
		narrow     [2]int
		statements int
	}{
		{"nothing known yet: half the share, aggregates at other, then the rest", [2]int{4, 0}, 3},
		{"no aggregate was due at narrow, although some were at other: narrow's whole share first", [2]int{4, 0}, 2},
	} {
		before := statements()
		require.Equal(t, want.narrow, claimKindsAt(t, d, nil, false, "narrow"), want.why)
		require.Equal(t, want.statements, statements()-before, want.why)
	}
}

// A destination with room for one delivery gives it to each kind in turn,
// whichever kind the worker's claims send first: a worker with an
// unordered backlog elsewhere sends unordered messages first at every
// claim (worker.orderedFirst), and rounding the first kind's half down
// there would have starved that destination's unordered messages, as
// rounding it up would its aggregates.
func TestADestinationWithRoomForOneGivesItToEachKindInTurn(t *testing.T) {
	t.Parallel()
	pool := setup(t, "single", "wide")
	single, err := guard.New("single", guard.Config{Concurrency: 1}, nil) // a share of 2
	require.NoError(t, err)
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), BatchSize: 64, LeaseDuration: time.Hour, Routes: map[string]Route{
		"single": {Destination: destination.Func(nil), Guard: single}, "wide": {Destination: destination.Func(nil)}}})
	backlog(t, pool, "single", 10, 10)
	held := map[string]int{"single": 1} // room for one
	var got [][2]int
	for range 4 {
		// A few at a time: a backlog larger than the first statement's
		// half of the claim could leave single's message out of it.
		backlog(t, pool, "wide", 3, 0)
		got = append(got, claimKindsAt(t, d, held, false, "single"))
	}
	require.Equal(t, [][2]int{{1, 0}, {0, 1}, {1, 0}, {0, 1}}, got)
}

// backlog enqueues unordered messages and aggregates of one message each
// for a destination.
func backlog(t *testing.T, pool *pgxpool.Pool, destination string, unordered, aggregates int) {
	t.Helper()
	msgs := make([]Message, 0, unordered+aggregates)
	for range unordered {
		msgs = append(msgs, Message{Topic: "t", Destination: destination, Payload: []byte(`{}`)})
	}
	for i := range aggregates {
		msgs = append(msgs, Message{Topic: "t", Destination: destination, AggregateType: "order",
			AggregateID: fmt.Sprint(destination, i), Payload: []byte(`{}`)})
	}
	enqueue(t, pool, msgs...)
}

// claimKindsAt runs one claim of up to 64 deliveries and says how many of
// them, at destination, were of unordered messages and of aggregates.
func claimKindsAt(t *testing.T, d *Dispatcher, held map[string]int, orderedFirst bool, destination string) (kinds [2]int) {
	t.Helper()
	groups, _, err := d.claimPaced(context.Background(), claimRequest{worker: "w", limit: 64, held: held, orderedFirst: orderedFirst})
	require.NoError(t, err)
	for _, g := range groups {
		switch {
		case g.msgs[0].Destination != destination:
		case g.msgs[0].AggregateID == "":
			kinds[0]++
		default:
			kinds[1]++
		}
	}
	return kinds
}

// With the dispatcher running, a destination whose aggregates have no
// larger share than its unordered messages (here a rate limit's) delivers
// its aggregates beside a backlog of its unordered messages, not after
// it: before its claims split its share between the kinds, the unordered
// statement took all of it at every claim, and no aggregate was delivered
// until the backlog was.
func TestAGuardedDestinationDeliversItsAggregatesBesideABacklog(t *testing.T) {
	t.Parallel()
	pool := setup(t, "limited")
	limited, err := guard.New("limited", guard.Config{Concurrency: 2, Rate: 1000, Burst: 10}, nil) // a share of 4
	require.NoError(t, err)
	var mu sync.Mutex
	var aggregate []bool // by delivery, in order: of an aggregate's message
	record := destination.Func(func(_ context.Context, d destination.Delivery) (destination.Outcome, error) {
		mu.Lock()
		defer mu.Unlock()
		aggregate = append(aggregate, d.AggregateID != "")
		return destination.Outcome{}, nil
	})
	const unordered, aggregates = 200, 20
	backlog(t, pool, "limited", unordered, aggregates)
	// One message a delivery, of either kind: the claims' split is then
	// the deliveries' order.
	startDispatcher(t, pool, Config{AggregateBatch: 1, Routes: map[string]Route{"limited": {Destination: record, Guard: limited}}})
	testwait.Until(t, 2*time.Minute, "every message delivered", func() bool {
		return countWhere(t, pool, "state = 'delivered'") == unordered+aggregates
	})

	mu.Lock()
	defer mu.Unlock()
	lastAggregate := 0
	for i, ok := range aggregate {
		if ok {
			lastAggregate = i
		}
	}
	// The unordered messages delivered before the last aggregate's message.
	unorderedBefore := lastAggregate + 1 - aggregates
	t.Logf("unordered before the last aggregate: %d", unorderedBefore)
	require.Less(t, unorderedBefore, unordered/2, "every aggregate delivered before half the backlog")
}
