package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/queries"
)

func TestUnorderedGroupSize(t *testing.T) {
	t.Parallel()
	d := New(nil, Config{AggregateBatch: 32})
	for _, c := range []struct {
		pace time.Duration
		want int
	}{
		{0, 1},                      // not known yet
		{time.Microsecond, 32},      // fast: as many as AggregateBatch allows
		{time.Millisecond, 20},      // 20 of them fit in unorderedGroupTime
		{15 * time.Millisecond, 1},  // slow: one per delivery
		{time.Hour, 1},              // hanging
		{time.Nanosecond, 32},       // too fast to measure
		{-time.Millisecond, 1},      // never happens; treated as unknown
		{unorderedGroupTime / 2, 2}, // two fit
	} {
		require.Equal(t, c.want, d.unorderedGroupSize(c.pace), "pace %v", c.pace)
	}
}

func TestUnorderedShareGroupsWithinSlotsAndBudget(t *testing.T) {
	t.Parallel()
	rows := func(spec map[string]int) []queries.OutboxClaimUnorderedRow {
		var out []queries.OutboxClaimUnorderedRow
		id := int64(0)
		for _, name := range []string{"a", "b", "c"} {
			for range spec[name] {
				id++
				out = append(out, queries.OutboxClaimUnorderedRow{ID: id, Destination: name})
			}
		}
		slices.Reverse(out) // RETURNING gives no order
		return out
	}
	for _, c := range []struct {
		name   string
		slots  []int32
		rows   map[string]int
		sizes  []int
		budget int
		want   map[string][]int // group sizes per destination
		excess int
	}{
		{"one destination, many messages", []int32{4}, map[string]int{"a": 20}, []int{5}, 10, map[string][]int{"a": {5, 5, 5, 5}}, 0},
		{"fewer messages than slots: one each", []int32{8}, map[string]int{"a": 3}, []int{32}, 10, map[string][]int{"a": {1, 1, 1}}, 0},
		{"uneven", []int32{3}, map[string]int{"a": 7}, []int{3}, 10, map[string][]int{"a": {3, 2, 2}}, 0},
		{"the budget bounds the deliveries", []int32{8, 8}, map[string]int{"a": 16, "b": 16}, []int{16, 16}, 4, map[string][]int{"a": {6, 5, 5}, "b": {16}}, 0},
		{"every destination with messages gets one", []int32{8, 8, 8}, map[string]int{"a": 30, "c": 2}, []int{32, 32, 32}, 3, map[string][]int{"a": {15, 15}, "c": {2}}, 0},
		{"what does not fit is excess", []int32{8, 4}, map[string]int{"a": 16, "b": 4}, []int{32, 1}, 3, map[string][]int{"a": {8, 8}, "b": {1}}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen := map[int64]bool{}
			s := unorderedShare{names: []string{"a", "b", "c"}[:len(c.slots)], slots: c.slots, sizes: c.sizes}
			groups, excess := s.group(rows(c.rows), c.budget)
			require.Len(t, excess, c.excess)
			for _, m := range excess {
				seen[m.ID] = true
			}
			require.LessOrEqual(t, len(groups), c.budget)
			got := map[string][]int{}
			for _, g := range groups {
				name := g.msgs[0].Destination
				got[name] = append(got[name], len(g.msgs))
				for i, m := range g.msgs {
					require.Equal(t, name, m.Destination, "a delivery runs messages of one destination")
					require.True(t, m.Counted, "an unordered claim counts every attempt")
					require.False(t, seen[m.ID], "message %d in two deliveries", m.ID)
					seen[m.ID] = true
					if i > 0 {
						require.Less(t, g.msgs[i-1].ID, m.ID, "in id order")
					}
				}
			}
			require.Equal(t, c.want, got)
			require.Len(t, seen, len(rows(c.rows)), "every leased message is delivered or released")
		})
	}
}

// A worker learns each destination's pace from its deliveries and ramps
// its group size up, doubling it with each delivery that went through; a
// failure forgets both (one message per delivery again), and a flight that
// tried nothing changes nothing.
func TestWorkerPace(t *testing.T) {
	t.Parallel()
	w := &worker{d: New(nil, Config{AggregateBatch: 32}), pace: map[string]time.Duration{}, ramp: map[string]int{}}
	msg := claimedMessage{OutboxClaimUnorderedRow: queries.OutboxClaimUnorderedRow{Destination: "a"}}
	land := func(elapsed time.Duration, outcomes ...string) {
		var rs []result
		for _, o := range outcomes {
			rs = append(rs, result{msg: msg, outcome: o})
		}
		w.clock(landed{results: rs, elapsed: elapsed})
	}
	require.Empty(t, w.groupSizes(), "nothing known: one per delivery")
	land(40*time.Millisecond, outcomeDelivered, outcomeDelivered, outcomeDelivered, outcomeDelivered)
	require.Equal(t, 10*time.Millisecond, w.pace["a"], "time per message tried")
	require.Equal(t, map[string]int{"a": 2}, w.groupSizes(), "two fit in 20 ms, and the ramp allows two")
	land(2*time.Millisecond, outcomeDelivered)
	require.Equal(t, 10*time.Millisecond-2*time.Millisecond, w.pace["a"], "a moving average")
	require.Equal(t, map[string]int{"a": 2}, w.groupSizes(), "20 ms / 8 ms")
	for range 10 {
		land(time.Microsecond, outcomeDelivered)
	}
	require.Equal(t, map[string]int{"a": 32}, w.groupSizes(), "fast: AggregateBatch")
	pace := w.pace["a"]
	land(time.Hour, outcomeReleased, outcomeReleased)
	require.Equal(t, pace, w.pace["a"], "nothing tried, nothing learnt")
	land(time.Millisecond, outcomeDelivered, outcomeRetry, outcomeReleased)
	require.Empty(t, w.groupSizes(), "a failure forgets the pace")
	land(time.Microsecond, outcomeDelivered)
	require.Equal(t, map[string]int{"a": 2}, w.groupSizes(), "and ramps up again from one")
	land(time.Millisecond, outcomeDead)
	require.Empty(t, w.groupSizes())
}

// A flight holds its lease while the database extended every lease it
// has, and has lost it as soon as the database says one was taken over.
func TestFlightLeaseState(t *testing.T) {
	t.Parallel()
	m := func(id int64) claimedMessage {
		return claimedMessage{OutboxClaimUnorderedRow: queries.OutboxClaimUnorderedRow{ID: id}}
	}
	f := &flight{g: group{msgs: []claimedMessage{m(1), m(2), m(3)}}}
	for _, c := range []struct {
		name       string
		extended   map[flightKey]bool
		held, lost bool
	}{
		{"all extended", map[flightKey]bool{{message: 1}: true, {message: 2}: true, {message: 3}: true}, true, false},
		{"one taken over", map[flightKey]bool{{message: 1}: true, {message: 2}: false, {message: 3}: true}, false, true},
		{"no answer (error)", map[flightKey]bool{}, false, false},
	} {
		held, lost := f.leaseState(c.extended)
		require.Equal(t, c.held, held, c.name)
		require.Equal(t, c.lost, lost, c.name)
	}
}

// A claim by a worker that knows its destination is fast leases unordered
// messages several to a delivery, each under its own lease, and their
// finalize applies each one's outcome; a delivery stops at its first
// failure and releases the rest untried, their attempts given back and due
// at once, with no attempt recorded for them.
func TestUnorderedMessagesShareDeliveriesAtAFastDestination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "fast")
	var msgs []Message
	for i := range 40 {
		msgs = append(msgs, Message{Topic: "t", Destination: "fast", Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	enqueue(t, pool, msgs...)
	var calls atomic.Int64
	var failing string // the message id that fails; set before any delivery
	d := newDispatcher(t, pool, Config{BatchSize: 4, AggregateBatch: 8, Routes: map[string]Route{"fast": {
		Retry: fastRetry(5),
		Destination: destination.Func(func(_ context.Context, dl destination.Delivery) (destination.Outcome, error) {
			calls.Add(1)
			if dl.MessageID == failing {
				return destination.Outcome{StatusCode: 503}, errors.New("HTTP 503: busy")
			}
			return destination.Outcome{StatusCode: 200}, nil
		}),
	}}})
	fast := map[string]int{"fast": 8}

	groups, _, err := d.claimPaced(ctx, claimRequest{worker: "w", limit: 4, sizes: fast})
	require.NoError(t, err)
	require.Len(t, groups, 4, "the worker's window: four deliveries")
	var ids []int64
	for _, g := range groups {
		require.Len(t, g.msgs, 8, "each of AggregateBatch messages")
		for _, m := range g.msgs {
			ids = append(ids, m.ID)
		}
	}
	require.Equal(t, 32, countWhere(t, pool, inStretchOf+" AND lease_version = 0", "w"), "each leased in a stretch, its row untouched")
	slices.Sort(ids)
	require.Len(t, slices.Compact(ids), 32)

	other, _, err := d.claimPaced(ctx, claimRequest{worker: "other", limit: 4, sizes: fast})
	require.NoError(t, err)
	require.Equal(t, 8, len(other[0].msgs)+len(other[1].msgs), "only the 8 messages left are claimable")
	require.Equal(t, 8, countWhere(t, pool, inStretchOf, "other"))

	failing = groups[1].msgs[3].MessageID.String()
	var results []result
	for _, g := range groups {
		results = append(results, d.deliverGroup(ctx, ctx, g)...)
	}
	_, _, err = d.finalize(ctx, "w", results)
	require.NoError(t, err)

	require.Equal(t, int64(28), calls.Load(), "three deliveries of 8, one stopped at its fourth")
	require.Equal(t, 27, countWhere(t, pool, "state = 'delivered' AND attempts = 1 AND lease_owner IS NULL"), "each attempt counted at its finalize")
	require.Zero(t, countWhere(t, pool, inStretchOf, "w"), "the finalize of its last messages deleted the stretch")
	require.Equal(t, 1, countWhere(t, pool, "state = 'pending' AND attempts = 1 AND last_error = 'HTTP 503: busy' AND lease_owner IS NULL AND leased_until IS NULL"))
	require.Equal(t, 4, countWhere(t, pool, "state = 'pending' AND attempts = 0 AND last_error IS NULL AND next_attempt_at <= now() AND lease_owner IS NULL AND leased_until IS NULL"+
		" AND id NOT IN (SELECT unnest(s.ids) FROM switchyard.outbox_stretches s)"),
		"the rest of its delivery: released, attempts given back, its lease gone, due at once")
	var attempts, failed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE outcome = 'retry') FROM switchyard.outbox_attempt_log WHERE applied`).Scan(&attempts, &failed))
	require.Equal(t, 28, attempts, "every attempt recorded, none for the untried")
	require.Equal(t, 1, failed)
}
