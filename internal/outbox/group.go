package outbox

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/switchyard/switchyard/internal/queries"
)

// group is what one delivery goroutine runs: messages without an aggregate
// of one destination (as many as its pace allows: see unorderedGroupSize),
// or the claimed messages of one aggregate in aggregate_seq order.
type group struct {
	msgs []claimedMessage
}

// aggregateKey names an aggregate: ordering is per destination too, since
// each destination receives its own sequence.
type aggregateKey struct {
	destination, aggregateType, aggregateID string
}

func keyOf(m claimedMessage) aggregateKey {
	return aggregateKey{m.Destination, m.AggregateType, m.AggregateID}
}

// groupByAggregate splits an ordered claim into one group per aggregate,
// each in sequence order (RETURNING gives no order).
func groupByAggregate(rows []queries.OutboxClaimOrderedRow) []group {
	slices.SortFunc(rows, func(a, b queries.OutboxClaimOrderedRow) int {
		return cmp.Or(cmp.Compare(a.Destination, b.Destination), cmp.Compare(a.AggregateType, b.AggregateType),
			cmp.Compare(a.AggregateID, b.AggregateID), cmp.Compare(a.AggregateSeq, b.AggregateSeq))
	})
	var groups []group
	for i, r := range rows {
		m := claimedMessage{
			OutboxClaimUnorderedRow: queries.OutboxClaimUnorderedRow{
				ID: r.ID, MessageID: r.MessageID, Topic: r.Topic, Destination: r.Destination,
				AggregateType: r.AggregateType, AggregateID: r.AggregateID, Payload: r.Payload,
				Headers: r.Headers, Attempts: r.Attempts, MaxAttempts: r.MaxAttempts,
				LeaseVersion: r.LeaseVersion, CreatedAt: r.CreatedAt,
			},
			AggregateSeq: r.AggregateSeq, AggregateLeaseVersion: r.AggregateLeaseVersion, Counted: r.Counted,
		}
		if !m.Counted {
			m.Attempts++ // the attempt it would be: counted at finalize
		}
		if i == 0 || keyOf(m) != keyOf(groups[len(groups)-1].msgs[0]) {
			groups = append(groups, group{})
		}
		groups[len(groups)-1].msgs = append(groups[len(groups)-1].msgs, m)
	}
	return groups
}

// deliverGroup delivers the group's messages one after another and stops at
// the first that is not delivered: the ones after it are released untried,
// since delivering them would overtake it (invariant 4). Unordered messages
// could overtake it, but their destination has just failed or is being
// stopped: they are released at once, to be claimed again (by a claim that
// sizes groups by the failure's pace), instead of waiting behind it.
func (d *Dispatcher) deliverGroup(ctx, hard context.Context, g group) []result {
	out := make([]result, 0, len(g.msgs))
	for i, m := range g.msgs {
		r := d.deliverOne(ctx, hard, m)
		out = append(out, r)
		if r.outcome == outcomeDelivered {
			continue
		}
		// An unordered message released by its destination's guard (the
		// breaker opened) waits as long as the first: its destination
		// refuses deliveries for now.
		var wait time.Duration
		if m.AggregateID == "" && r.outcome == outcomeReleased {
			wait = r.retryDelay
		}
		for _, rest := range g.msgs[i+1:] {
			out = append(out, result{msg: rest, outcome: outcomeReleased, retryDelay: wait, started: r.finished, finished: r.finished})
		}
		break
	}
	return out
}

// aggregateOutcome is what a finalize does to a leased aggregate.
type aggregateOutcome struct {
	key          aggregateKey
	leaseVersion int64
	doneSeq      int64         // the last message finished (delivered or dead); 0 if none
	dueIn        time.Duration // when its head may be tried again
	blocked      bool          // its head went dead
	decided      bool          // a message that was not delivered was seen
}

// aggregateOutcomes derives each leased aggregate's next state from its
// messages' results, which arrive in delivery order: done up to the last
// delivered one, then blocked by a dead head, retried after the head's
// delay, or due at once when everything went through.
func aggregateOutcomes(results []result) []aggregateOutcome {
	var out []aggregateOutcome
	index := map[aggregateKey]int{}
	for _, r := range results {
		if r.msg.AggregateID == "" {
			continue
		}
		k := keyOf(r.msg)
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, aggregateOutcome{key: k, leaseVersion: r.msg.AggregateLeaseVersion})
		}
		a := &out[i]
		if a.decided {
			continue
		}
		switch r.outcome {
		case outcomeDelivered:
			a.doneSeq = r.msg.AggregateSeq
		case outcomeDead:
			a.doneSeq, a.blocked, a.decided = r.msg.AggregateSeq, true, true
		default: // retry or released
			a.dueIn, a.decided = r.retryDelay, true
		}
	}
	return out
}

// messagesIn counts the messages of groups.
func messagesIn(groups []group) int {
	n := 0
	for _, g := range groups {
		n += len(g.msgs)
	}
	return n
}
