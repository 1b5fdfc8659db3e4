package outbox

import (
	"cmp"
	"slices"
	"time"

	"github.com/switchyard/switchyard/internal/queries"
)

// unorderedGroupTime is about how long one delivery should take over the
// unordered messages it runs one after another, at their destination's
// recent pace: long enough that a fast destination's messages are leased,
// delivered and finalized by the hundred per statement, short enough that
// a finished message waits little for the rest of its group before its
// finalize.
const unorderedGroupTime = 20 * time.Millisecond

// unorderedGroupSize is how many unordered messages of a destination one
// delivery runs, given how long a message took there recently (pace, 0:
// not known yet): as many as fit in unorderedGroupTime, at least 1, at most
// AggregateBatch. A destination whose pace is not known, because nothing
// was delivered there yet or every delivery hangs, gets one message per
// delivery, so that its waiting messages hold no more than its share.
func (d *Dispatcher) unorderedGroupSize(pace time.Duration) int {
	if pace <= 0 {
		return 1
	}
	return max(1, min(int(unorderedGroupTime/pace), d.cfg.AggregateBatch))
}

// unorderedShare is what one unordered claim may lease of each destination
// that has room: its deliveries (slots, from the destination's cap) and,
// with its group size, its messages.
type unorderedShare struct {
	names    []string
	slots    []int32 // deliveries each destination may add
	messages []int32 // messages each may lease: its slots times its group size
	sizes    []int   // its group size
	largest  int     // the largest group size
}

// unorderedShareOf lists, in claim order, the destinations with room, at
// most n (each needs a delivery of its own, and the claim may add n), with
// their group sizes (1 where sizes has none).
func unorderedShareOf(destinations []string, caps []int32, n int, sizes map[string]int) unorderedShare {
	s := unorderedShare{largest: 1}
	for i, name := range destinations {
		if caps[i] <= 0 || len(s.names) == n {
			continue
		}
		size := max(sizes[name], 1)
		s.names = append(s.names, name)
		s.slots = append(s.slots, caps[i])
		s.messages = append(s.messages, caps[i]*int32(size))
		s.sizes = append(s.sizes, size)
		s.largest = max(s.largest, size)
	}
	return s
}

// group splits what an unordered claim leased into at most budget
// deliveries, none of a destination beyond its slots or its group size:
// every destination with messages gets one, then, in claim order, as many
// more as it has messages, slots and budget left. A destination's messages
// are dealt round-robin over its deliveries in id order, so that they run
// side by side as far as its slots allow. What does not fit (the budget,
// shared by all destinations, ran out first) is excess: the caller
// releases it at once, so that a destination never holds more messages
// than its deliveries' sizes allow.
func (s unorderedShare) group(rows []queries.OutboxClaimUnorderedRow, budget int) (groups []group, excess []claimedMessage) {
	byDestination := make([][]claimedMessage, len(s.names))
	for _, r := range rows {
		// A first try, leased in a stretch, counts its attempt at its
		// finalize; Attempts says which attempt it would be.
		m := claimedMessage{OutboxClaimUnorderedRow: r, Counted: r.Stretch == 0}
		if !m.Counted {
			m.Attempts++
		}
		i := slices.Index(s.names, r.Destination)
		if i < 0 { // cannot be: the claim leases only s.names
			excess = append(excess, m)
			continue
		}
		byDestination[i] = append(byDestination[i], m)
	}
	count := make([]int, len(s.names))
	used := 0
	for i, msgs := range byDestination {
		if len(msgs) > 0 && used < budget {
			count[i], used = 1, used+1
		}
	}
	for i, msgs := range byDestination {
		more := max(0, min(len(msgs), int(s.slots[i]), count[i]+budget-used)-count[i])
		count[i], used = count[i]+more, used+more
	}
	for i, msgs := range byDestination {
		slices.SortFunc(msgs, func(a, b claimedMessage) int { return cmp.Compare(a.ID, b.ID) })
		keep := min(len(msgs), count[i]*s.size(i))
		excess = append(excess, msgs[keep:]...)
		if keep == 0 {
			continue
		}
		first := len(groups)
		groups = append(groups, make([]group, count[i])...)
		for j, m := range msgs[:keep] {
			g := &groups[first+j%count[i]]
			g.msgs = append(g.msgs, m)
		}
	}
	return groups, excess
}

// size is destination i's group size (1 when not given).
func (s unorderedShare) size(i int) int {
	if i < len(s.sizes) {
		return max(s.sizes[i], 1)
	}
	return 1
}
