package outbox

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/destination/guard"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/testlog"
	"github.com/switchyard/switchyard/internal/testwait"
)

// A finished delivery waits for the worker's flush (or for a full finalize)
// while other deliveries are in flight, so that one finalize carries many
// messages; the last delivery in flight is finalized at once, and so is a
// delivery that makes the finished messages finalizeMost.
func TestFinishedDeliveriesAreFinalizedTogether(t *testing.T) {
	t.Parallel()
	pool := setup(t, "alpha")
	d, groups := claimedApart(t, pool, 3)
	a, b, c := groups[0].msgs[0], groups[1].msgs[0], groups[2].msgs[0]
	w := inFlight(d, groups)
	delivered := func(m claimedMessage) []result {
		now := time.Now()
		return []result{{msg: m, outcome: outcomeDelivered, started: now, finished: now}}
	}
	isDelivered := func(m claimedMessage) bool {
		return countWhere(t, pool, "id = $1 AND state = 'delivered'", m.ID) == 1
	}

	// Stale copies of a pad the finished messages (a finalize records them
	// as not applied): a hundred, three deliveries of 32 messages, do not
	// make a finalize while others are in flight.
	stale := delivered(a)[0]
	stale.msg.LeaseVersion--
	stale.msg.Stretch = 0 // an earlier lease of the message's own, not its stretch's
	w.done = append(w.done, deliveriesOf(stale, 100)...)
	w.finished(landed{id: 0, results: delivered(a)})
	require.False(t, isDelivered(a), "two deliveries still in flight: a waits for the flush")
	require.Len(t, w.done, 101)

	// b's landing makes the finished messages finalizeMost.
	w.done = append(w.done, deliveriesOf(stale, finalizeMost-1-len(w.done))...)
	w.finished(landed{id: 1, results: delivered(b)})
	require.Empty(t, w.done, "a full finalize does not wait for the flush")
	w.applyFinalize(<-w.finalized)
	require.True(t, isDelivered(a) && isDelivered(b))

	w.finished(landed{id: 2, results: delivered(c)})
	require.Empty(t, w.done, "the last delivery in flight is finalized at once")
	w.applyFinalize(<-w.finalized)
	require.True(t, isDelivered(c))
	require.Empty(t, w.flights)
}

// A finalize never carries part of an aggregate's delivery, even past
// finalizeMost: the finalize of the first part would move the aggregate
// on and free it, the next claim would lease the rest again, and the
// finalize of the rest would be stale (the messages delivered twice). Nor
// does it pass finalizeMost for the next lease of the same aggregate,
// whose results then apply under their own lease.
func TestAFinalizeNeverSplitsAnAggregatesResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)})
	for range 5 {
		enqueue(t, pool, Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: "1", Payload: []byte(`{}`)})
	}
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	groups, err := d.claim(ctx, "w", 10, nil)
	require.NoError(t, err)
	require.Len(t, groups, 2)
	slices.SortFunc(groups, func(a, b group) int { return cmp.Compare(len(a.msgs), len(b.msgs)) })
	require.Len(t, groups[1].msgs, 5, "the aggregate's messages in one delivery")
	now := time.Now()
	// Stale copies of the unordered message fill the finalize up to two
	// short of finalizeMost: they change nothing.
	stale := result{msg: groups[0].msgs[0], outcome: outcomeDelivered, started: now, finished: now}
	stale.msg.LeaseVersion--
	stale.msg.Stretch = 0 // an earlier lease of the message's own, not its stretch's
	w := newWorker(d, "w")
	w.done = append(w.done, deliveriesOf(stale, finalizeMost-2)...)
	for _, m := range groups[1].msgs {
		w.done = append(w.done, result{msg: m, outcome: outcomeDelivered, started: now, finished: now, delivery: 1})
	}

	w.startFinalize()
	require.Empty(t, w.done, "the aggregate's five results in the same finalize")
	o := <-w.finalized
	require.NoError(t, o.err)
	w.applyFinalize(o)
	require.Equal(t, 5, countWhere(t, pool, "state = 'delivered' AND aggregate_id = '1'"))
	again, err := d.claim(ctx, "w", 10, nil)
	require.NoError(t, err)
	require.Empty(t, again, "nothing left to lease again")

	// Results of an earlier lease of an aggregate (run out while they
	// waited for their finalize) followed by the next lease's, each lease
	// a delivery (a flight) of its own: the batch ends with the earlier
	// lease's, and the next lease's apply in the next finalize, under
	// their own lease.
	for range 3 {
		enqueue(t, pool, Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: "2", Payload: []byte(`{}`)})
	}
	groups, err = d.claim(ctx, "w", 10, nil)
	require.NoError(t, err)
	require.Len(t, groups, 1)
	require.Len(t, groups[0].msgs, 3)
	w.done = append(w.done, deliveriesOf(stale, finalizeMost-2)...)
	for _, m := range groups[0].msgs[:2] {
		earlier := result{msg: m, outcome: outcomeDelivered, started: now, finished: now, delivery: 2}
		earlier.msg.AggregateLeaseVersion--
		w.done = append(w.done, earlier)
	}
	for _, m := range groups[0].msgs {
		w.done = append(w.done, result{msg: m, outcome: outcomeDelivered, started: now, finished: now, delivery: 3})
	}
	w.startFinalize()
	require.Len(t, w.done, 3, "the next lease's results wait for the next finalize")
	w.applyFinalize(<-w.finalized)
	require.True(t, w.finalizing, "the outcome starts the next finalize")
	w.applyFinalize(<-w.finalized)
	require.Equal(t, 3, countWhere(t, pool, "state = 'delivered' AND aggregate_id = '2'"))
}

// A finalize takes an unordered delivery's results whole too, past
// finalizeMost: a claim of 32 deliveries of 32 messages is one finalize
// of 1,024, not 1,000 and then a statement of 24.
func TestAFinalizeTakesAnUnorderedDeliveryWhole(t *testing.T) {
	t.Parallel()
	pool := setup(t, "alpha")
	d, groups := claimedApart(t, pool, 5)
	// One delivery of the five, as a destination's known pace groups them.
	var g group
	for _, claimed := range groups {
		g.msgs = append(g.msgs, claimed.msgs...)
	}
	w := newWorker(d, "w")
	w.flights[7] = &flight{g: g, cancel: func() {}}
	w.held["alpha"]++
	now := time.Now()
	stale := result{msg: g.msgs[0], outcome: outcomeDelivered, started: now, finished: now}
	stale.msg.LeaseVersion--
	stale.msg.Stretch = 0 // an earlier lease of the message's own, not its stretch's
	w.done = append(w.done, deliveriesOf(stale, finalizeMost-2)...)
	results := make([]result, len(g.msgs))
	for i, m := range g.msgs {
		results[i] = result{msg: m, outcome: outcomeDelivered, started: now, finished: now}
	}

	w.finished(landed{id: 7, results: results})
	require.Empty(t, w.done, "the delivery's five results in the same finalize")
	o := <-w.finalized
	require.NoError(t, o.err)
	require.Len(t, o.results, finalizeMost+3)
	w.applyFinalize(o)
	require.Equal(t, 5, countWhere(t, pool, "state = 'delivered'"))
}

// The flush is timed from the first finished delivery that waits for
// it, not pushed back by those that land after it, and not set at all
// while nothing waits: an idle worker does not wake for it. The results
// an enqueuing transaction held back wait for a flush of their own.
func TestTheFlushWaitsFromTheFirstFinishedDelivery(t *testing.T) {
	t.Parallel()
	pool := setup(t, "alpha")
	d, groups := claimedApart(t, pool, 3)
	w := inFlight(d, groups)
	land := func(id int) {
		now := time.Now()
		w.finished(landed{id: uint64(id), results: []result{{msg: groups[id].msgs[0], outcome: outcomeDelivered, started: now, finished: now}}})
	}
	require.True(t, w.flushAt.IsZero(), "nothing waits")

	land(0)
	first := w.flushAt
	require.False(t, first.IsZero(), "the first delivery that waits sets the flush")
	land(1)
	require.Equal(t, first, w.flushAt, "a later one does not push it back")
	testwait.For(t, 10*time.Second, "the flush", w.flushTimer.C)
	require.False(t, time.Now().Before(first), "not before its time")
	w.flush()
	require.Empty(t, w.done)
	require.True(t, w.flushAt.IsZero())

	// The last in flight lands while that finalize runs: it waits, with
	// a flush set, and the outcome finalizes it at once.
	land(2)
	require.Len(t, w.done, 1)
	require.False(t, w.flushAt.IsZero())
	o := <-w.finalized
	require.NoError(t, o.err)
	w.applyFinalize(o)
	require.Empty(t, w.done)
	require.True(t, w.flushAt.IsZero(), "nothing waits: the flush is stopped")
	o = <-w.finalized
	require.NoError(t, o.err)
	w.applyFinalize(o)
	require.Equal(t, 3, countWhere(t, pool, "state = 'delivered'"))
	select {
	case <-w.flushTimer.C:
		t.Fatal("a flush with nothing waiting")
	case <-time.After(4 * flushInterval):
	}

	// Held back by an enqueuing transaction: they wait for the next flush.
	now := time.Now()
	w.applyFinalize(finalizeOutcome{busy: []result{{msg: groups[2].msgs[0], outcome: outcomeDelivered, started: now, finished: now, delivery: 9}}})
	require.Len(t, w.done, 1)
	require.False(t, w.flushAt.IsZero(), "held-back results set the flush")
	testwait.For(t, 10*time.Second, "their flush", w.flushTimer.C)
}

// claimedApart enqueues n unordered messages to alpha and has a new
// dispatcher, with a no-op route there, claim them: a delivery each.
func claimedApart(t *testing.T, pool *pgxpool.Pool, n int) (*Dispatcher, []group) {
	t.Helper()
	for range n {
		enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)})
	}
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	groups, err := d.claim(context.Background(), "w", 10, nil)
	require.NoError(t, err)
	require.Len(t, groups, n, "one message per delivery")
	return d, groups
}

// inFlight is a new worker of d with groups in flight as flights 0, 1, ...
func inFlight(d *Dispatcher, groups []group) *worker {
	w := newWorker(d, "w")
	for id, g := range groups {
		w.flights[uint64(id)] = &flight{g: g, cancel: func() {}}
		w.held[g.msgs[0].Destination]++
	}
	return w
}

// deliveriesOf is n copies of r, each a delivery of its own (numbered from
// 1<<32, apart from the flights a test lands).
func deliveriesOf(r result, n int) []result {
	copies := make([]result, n)
	for i := range copies {
		copies[i] = r
		copies[i].delivery = 1<<32 + uint64(i)
	}
	return copies
}

// A finalize carries finalizeMost results at most: the rest wait for the
// next, which the outcome starts at once, also when a flush took the
// first part while deliveries are in flight. A flush that comes while a
// finalize is in flight is not lost: the outcome starts the next
// finalize for what finished meanwhile, although deliveries are still in
// flight.
func TestFinalizesStayBoundedAndKeepTheirFlush(t *testing.T) {
	t.Parallel()
	pool := setup(t, "alpha")
	enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)})
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	groups, err := d.claim(context.Background(), "w", 10, nil)
	require.NoError(t, err)
	require.Len(t, groups, 1)
	now := time.Now()
	// A stale copy: its finalize changes nothing, whatever the count.
	stale := result{msg: groups[0].msgs[0], outcome: outcomeDelivered, started: now, finished: now}
	stale.msg.LeaseVersion--
	stale.msg.Stretch = 0 // an earlier lease of the message's own, not its stretch's
	w := newWorker(d, "w")
	// nextStarted takes in the finalize in flight's outcome, which must
	// start the next for everything left, whose outcome starts none.
	nextStarted := func(why string) {
		w.applyFinalize(<-w.finalized)
		require.True(t, w.finalizing, why)
		require.Empty(t, w.done)
		w.applyFinalize(<-w.finalized)
		require.False(t, w.finalizing)
	}

	w.done = append(w.done, deliveriesOf(stale, finalizeMost+500)...)
	w.startFinalize()
	require.Len(t, w.done, 500, "one finalize carries finalizeMost")
	nextStarted("the rest at once: nothing else is in flight")

	w.flights[0] = &flight{g: groups[0], cancel: func() {}} // a delivery still in flight
	w.done = append(w.done, deliveriesOf(stale, finalizeMost+500)...)
	w.flush()
	require.Len(t, w.done, 500, "one finalize carries finalizeMost")
	nextStarted("what the flush could not take, at once, although a delivery is in flight")

	w.done = append(w.done, stale)
	w.flush()
	require.True(t, w.finalizing)
	w.done = append(w.done, stale) // landed meanwhile
	w.flush()                      // while the finalize is in flight
	require.Len(t, w.done, 1, "no second finalize in flight")
	nextStarted("the flush that came meanwhile starts the next finalize")
}

// A claim's deliveries start as each of its statements returns: those of
// the kind sent first never wait for the other kind's statement, which may
// find nothing. A worker sends the ordered claim first when its last claim
// found ordered messages only, and was not full.
func TestAClaimsDeliveriesStartAsEachStatementReturns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), LeaseDuration: time.Hour, IdlePoll: time.Hour,
		Routes: map[string]Route{"alpha": {Destination: acceptAll}}})
	// leases is what the database holds leased of the messages of topic
	// unordered and of aggregate ordered.
	leases := func(unordered, ordered string) [2]bool {
		t.Helper()
		var u, o bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT
			EXISTS (SELECT FROM switchyard.outbox o WHERE topic = $1 AND (lease_owner IS NOT NULL
				OR EXISTS (SELECT FROM switchyard.outbox_stretches s WHERE o.id = ANY (s.ids)))),
			EXISTS (SELECT FROM switchyard.outbox_aggregates WHERE aggregate_id = $2 AND lease_owner IS NOT NULL)`,
			unordered, ordered).Scan(&u, &o))
		return [2]bool{u, o}
	}
	// step is one call of claimRequest.leased: the kinds it was given, and
	// the leases held when it was called.
	type step struct {
		kinds  string
		leased [2]bool
	}
	claimBoth := func(n string, orderedFirst bool) []step {
		t.Helper()
		enqueue(t, pool, Message{Topic: "u" + n, Destination: "alpha", Payload: []byte(`{}`)},
			Message{Topic: "o" + n, Destination: "alpha", AggregateType: "order", AggregateID: n, Payload: []byte(`{}`)})
		var steps []step
		groups, _, err := d.claimPaced(ctx, claimRequest{worker: "w", limit: 10, orderedFirst: orderedFirst,
			leased: func(groups []group) {
				kinds := ""
				for _, g := range groups {
					kinds += map[bool]string{true: "unordered ", false: "ordered "}[g.msgs[0].AggregateID == ""]
				}
				steps = append(steps, step{kinds: kinds, leased: leases("u"+n, n)})
			}})
		require.NoError(t, err)
		require.Len(t, groups, 2)
		return steps
	}
	require.Equal(t, []step{{"unordered ", [2]bool{true, false}}, {"ordered ", [2]bool{true, true}}}, claimBoth("1", false),
		"the unordered message's delivery was handed over before the ordered claim was sent")
	require.Equal(t, []step{{"ordered ", [2]bool{false, true}}, {"unordered ", [2]bool{true, true}}}, claimBoth("2", true),
		"ordered first: the aggregate's delivery was handed over before the unordered claim was sent")

	w := newWorker(d, "w")
	enqueue(t, pool, Message{Topic: "o3", Destination: "alpha", AggregateType: "order", AggregateID: "3", Payload: []byte(`{}`)})
	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 1)
	require.True(t, w.orderedFirst, "a claim that found ordered messages only: the next asks for them first")
	landAll(w)
	enqueue(t, pool, Message{Topic: "u4", Destination: "alpha", Payload: []byte(`{}`)})
	w.nextClaim = time.Time{}
	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 1)
	require.False(t, w.orderedFirst, "a claim that found unordered messages: they come first again")
	landAll(w)

	// A full claim (a backlog) of aggregates alone: unordered first, so
	// that the ordered claim gets all the room in the second statement.
	small := newDispatcher(t, pool, Config{Logger: testlog.New(t), LeaseDuration: time.Hour, IdlePoll: time.Hour, BatchSize: 2,
		Routes: map[string]Route{"alpha": {Destination: acceptAll}}})
	w = newWorker(small, "w")
	enqueue(t, pool, Message{Topic: "o5", Destination: "alpha", AggregateType: "order", AggregateID: "5", Payload: []byte(`{}`)},
		Message{Topic: "o6", Destination: "alpha", AggregateType: "order", AggregateID: "6", Payload: []byte(`{}`)})
	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 2)
	require.False(t, w.orderedFirst, "a full claim leaves unordered messages first")
	landAll(w)
}

// A worker claims again only when something may be due: after a claim
// that came back full (it wakes another worker too), a wake-up, or a
// finalize that says messages are due at once because of it (an
// aggregate it moved on has more, enqueued while it was leased; a message
// given back without a delay). A claim that came back short holds it off
// until then, or until the idle poll: claiming again at once found
// nothing almost every time.
func TestAWorkerClaimsAgainOnlyWhenSomethingMayBeDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), BatchSize: 2, IdlePoll: time.Hour, Routes: map[string]Route{"alpha": {Destination: acceptAll}}})
	w := newWorker(d, "w")
	holdsOff := func() bool { return w.nextClaim.After(time.Now()) }
	ordered := Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: "1", Payload: []byte(`{}`)}

	enqueue(t, pool, ordered)
	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 1)
	require.True(t, holdsOff(), "a claim that came back short holds the worker off")
	enqueue(t, pool, ordered) // while the aggregate is leased
	landAll(w)
	require.Equal(t, 1, countWhere(t, pool, "state = 'pending'"), "the second message waits")
	require.False(t, holdsOff(), "the finalize said the aggregate has more, due at once")

	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 1, "the aggregate's second message")
	landAll(w)
	require.Zero(t, countWhere(t, pool, "state = 'pending'"))
	require.True(t, holdsOff(), "a finalize with nothing more due leaves the worker held off")

	enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)}, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)})
	w.nextClaim = time.Time{} // as a wake-up does
	clear(w.pace)             // one message per delivery, as at the start
	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 2, "a full claim")
	require.False(t, holdsOff(), "a full claim does not hold the worker off")
	require.Len(t, d.wake, 1, "and wakes another worker: there may be more")
	landAll(w)

	unordered := Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)}
	enqueue(t, pool, unordered, unordered)
	groups, err := d.claim(ctx, "w", 10, nil)
	require.NoError(t, err)
	require.Len(t, groups, 2)
	giveBack := func(g group, delay time.Duration) bool {
		now := time.Now()
		_, moreDue, err := d.finalize(ctx, "w", []result{{msg: g.msgs[0], outcome: outcomeReleased, retryDelay: delay, started: now, finished: now}})
		require.NoError(t, err)
		return moreDue
	}
	require.False(t, giveBack(groups[0], time.Hour), "a message given back for an hour is not due")
	require.True(t, giveBack(groups[1], 0), "one given back without a delay is")
}

// A claim that stopped at a destination's share (claimable), or left it
// out for the deliveries the worker holds there, holds the worker off like
// any claim that was not full, but the finalize of deliveries that land
// lets it claim that destination's next messages at once.
func TestAWorkerAtADestinationsShareClaimsAgainWhenItsDeliveriesLand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "narrow", "wide")
	g, err := guard.New("narrow", guard.Config{Concurrency: 2}, nil) // a share of 4 deliveries
	require.NoError(t, err)
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), BatchSize: 10, IdlePoll: time.Hour, Routes: map[string]Route{
		"narrow": {Destination: acceptAll, Guard: g}, "wide": {Destination: acceptAll}}})
	w := newWorker(d, "w")
	holdsOff := func() bool { return w.nextClaim.After(time.Now()) }
	t.Cleanup(func() { landAll(w) })
	for range 8 {
		enqueue(t, pool, Message{Topic: "t", Destination: "narrow", Payload: []byte(`{}`)})
	}

	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 4, "the destination's share")
	require.True(t, holdsOff(), "not full: held off")
	w.finished(<-w.results)
	w.finalizeAll() // as the flush does, and waits for it
	require.False(t, holdsOff(), "a delivery landed where the claim was capped")

	enqueue(t, pool, Message{Topic: "t", Destination: "wide", Payload: []byte(`{}`)})
	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 4, "wide's message; narrow left out, three of its four still held")
	require.True(t, holdsOff())
	landAll(w)
	require.Equal(t, 4, countWhere(t, pool, "state = 'pending'"))
	require.False(t, holdsOff(), "deliveries landed at the destination left out")
	clear(w.pace) // one message per delivery, as at the start
	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 4, "narrow's next four")
}

// A destination that keeps up fast (two deliveries in a row went through
// at 5 ms a message or less since its last failure) may fill half the
// worker's window with aggregates, whatever its bulkhead: under offered
// load each aggregate brings a message or two to a claim, and twice the
// bulkhead's aggregates a claim were too few to keep up. Its unordered
// messages keep twice the bulkhead (their deliveries grow with the pace
// instead), and so does a rate-limited destination, whose fast pace may
// only mean unspent burst. The pace comes from deliveries landing
// (worker.clock), as in a running worker.
func TestAFastDestinationsAggregatesMayFillHalfTheWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "narrow", "limited")
	narrow, err := guard.New("narrow", guard.Config{Concurrency: 2}, nil) // a share of 4 deliveries
	require.NoError(t, err)
	limited, err := guard.New("limited", guard.Config{Concurrency: 2, Rate: 1000, Burst: 10}, nil) // also 4
	require.NoError(t, err)
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), BatchSize: 20, IdlePoll: time.Hour, Routes: map[string]Route{
		"narrow": {Destination: acceptAll, Guard: narrow}, "limited": {Destination: acceptAll, Guard: limited}}})
	landing := func(name, outcome string, elapsed time.Duration) landed {
		msg := claimedMessage{OutboxClaimUnorderedRow: queries.OutboxClaimUnorderedRow{Destination: name}}
		return landed{results: []result{{msg: msg, outcome: outcome}}, elapsed: elapsed}
	}
	fast := func(name string) landed { return landing(name, outcomeDelivered, time.Millisecond) }
	slow := landing("narrow", outcomeDelivered, 15*time.Millisecond)
	for _, c := range []struct {
		name          string
		destination   string
		aggregates    bool     // 30 messages in 30 aggregates
		unordered     bool     // 30 unordered messages
		landings      []landed // before the claim, in order
		want          int      // deliveries claimed
		wantUnordered int      // of them, of unordered messages
	}{
		{"pace not known", "narrow", true, false, nil, 4, 0},
		{"slow", "narrow", true, false, []landed{slow, slow}, 4, 0},
		{"fast once", "narrow", true, false, []landed{fast("narrow")}, 4, 0},
		{"fast twice", "narrow", true, false, []landed{fast("narrow"), fast("narrow")}, 10, 0},
		{"fast twice, then a failure", "narrow", true, false, []landed{fast("narrow"), fast("narrow"), landing("narrow", outcomeRetry, time.Millisecond)}, 4, 0},
		{"fast twice, rate-limited", "limited", true, false, []landed{fast("limited"), fast("limited")}, 4, 0},
		{"fast twice, unordered", "narrow", false, true, []landed{fast("narrow"), fast("narrow")}, 4, 4},
		// The unordered statement first: its share, then aggregates up to
		// theirs, the unordered deliveries counted against it.
		{"fast twice, both kinds", "narrow", true, true, []landed{fast("narrow"), fast("narrow")}, 10, 4},
	} {
		for i := range 30 {
			if c.aggregates {
				enqueue(t, pool, Message{Topic: "t", Destination: c.destination, AggregateType: "order", AggregateID: strconv.Itoa(i), Payload: []byte(`{}`)})
			}
			if c.unordered {
				enqueue(t, pool, Message{Topic: "t", Destination: c.destination, Payload: []byte(`{}`)})
			}
		}
		w := newWorker(d, "w")
		for _, l := range c.landings {
			w.clock(l)
		}
		w.claimIfRoom(ctx, ctx)
		require.Len(t, w.flights, c.want, c.name)
		unordered := 0
		for _, f := range w.flights {
			if f.g.msgs[0].AggregateID == "" {
				unordered++
			}
		}
		require.Equal(t, c.wantUnordered, unordered, c.name)
		landAll(w)
		_, err := pool.Exec(ctx, "DELETE FROM switchyard.outbox")
		require.NoError(t, err)
	}
}

// A finalize that makes messages due while its worker has no room to
// claim them wakes another worker; with room, the worker claims them
// itself and wakes no one. Either way the worker claims once it has room.
func TestAFinalizeThatMakesMessagesDueWakesAWorkerWithRoom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), BatchSize: 2, IdlePoll: time.Hour, Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	ordered := func(aggregate string) Message {
		return Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: aggregate, Payload: []byte(`{}`)}
	}
	for _, full := range []bool{true, false} {
		aggregate := strconv.FormatBool(full)
		enqueue(t, pool, ordered(aggregate))
		groups, err := d.claim(ctx, "w", 10, nil)
		require.NoError(t, err)
		i := slices.IndexFunc(groups, func(g group) bool { return g.msgs[0].AggregateID == aggregate })
		require.GreaterOrEqual(t, i, 0, "the aggregate claimed")
		g := groups[i]
		enqueue(t, pool, ordered(aggregate)) // while the aggregate is leased
		w := newWorker(d, "w")
		w.nextClaim = time.Now().Add(time.Hour)
		if full {
			for id := range uint64(2) {
				w.flights[id] = &flight{g: g, cancel: func() {}}
			}
		}
		now := time.Now()
		w.done = []result{{msg: g.msgs[0], outcome: outcomeDelivered, started: now, finished: now}}
		w.finalizeAll()
		require.Equal(t, full, len(d.wake) == 1, "full %v: another worker woken", full)
		require.True(t, w.nextClaim.IsZero(), "full %v: the worker itself claims too, once it has room", full)
		select {
		case <-d.wake:
		default:
		}
	}
}

// A worker claims and delivers while its finalize waits: the finalize
// runs beside the worker's loop (startFinalize), so one held up by a lock
// (here a transaction holding the delivered message's row) never holds
// back the next messages. Finalized on the loop, the second message
// waited for the finalize's timeout, a third of the lease.
func TestAWorkerDeliversWhileItsFinalizeWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	landedFirst, finishFirst := make(chan struct{}), make(chan struct{})
	secondDelivered := make(chan struct{}, 1)
	startDispatcher(t, pool, Config{Workers: 1, LeaseDuration: time.Minute, HeartbeatInterval: time.Hour, Routes: map[string]Route{
		"alpha": {Destination: destination.Func(func(_ context.Context, d destination.Delivery) (destination.Outcome, error) {
			if d.Topic == "first" {
				close(landedFirst) // once: its lease (a minute) outlasts the test
				<-finishFirst
				return destination.Outcome{}, nil
			}
			select {
			case secondDelivered <- struct{}{}:
			default: // seen already
			}
			return destination.Outcome{}, nil
		})}}})
	enqueue(t, pool, Message{Topic: "first", Destination: "alpha", Payload: []byte(`{}`)})
	testwait.For(t, 10*time.Second, "the first message delivered", landedFirst)
	// Leased and being delivered: its finalize will wait for this lock.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var leased bool
	require.NoError(t, tx.QueryRow(ctx, `SELECT o.lease_owner IS NOT NULL OR EXISTS (
			SELECT FROM switchyard.outbox_stretches s WHERE o.id = ANY (s.ids))
		FROM switchyard.outbox o WHERE o.topic = 'first' FOR UPDATE OF o`).Scan(&leased))
	require.True(t, leased)
	close(finishFirst)
	testwait.Until(t, 10*time.Second, "the finalize waiting for the lock", func() bool {
		var waiting int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()
			  AND wait_event_type = 'Lock' AND query LIKE '%OutboxFinalize%'`).Scan(&waiting))
		return waiting == 1
	})

	enqueue(t, pool, Message{Topic: "second", Destination: "alpha", Payload: []byte(`{}`)})
	testwait.For(t, 10*time.Second, "the second message delivered while the first one's finalize waits", secondDelivered)
	require.Equal(t, 1, countWhereIn(t, tx, "topic = 'first' AND state = 'pending'"), "the first one's finalize still waits")

	require.NoError(t, tx.Rollback(ctx))
	testwait.Until(t, 10*time.Second, "both finalized", func() bool {
		return countWhere(t, pool, "state = 'delivered'") == 2
	})
}

// acceptAll is a destination that accepts every delivery at once.
var acceptAll = destination.Func(func(context.Context, destination.Delivery) (destination.Outcome, error) {
	return destination.Outcome{}, nil
})

// landAll waits for w's deliveries in flight to land, as its loop does,
// and for their finalize: the last one to land is finalized at once.
func landAll(w *worker) {
	for len(w.flights) > 0 {
		w.finished(<-w.results)
	}
	w.finalizeAll()
}
