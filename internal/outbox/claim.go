package outbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/switchyard/switchyard/internal/queries"
)

// claim leases up to limit deliveries: messages without an aggregate
// first and aggregates for the rest, each destination within its share,
// or its aggregates within theirs (see claimable), where both kinds are
// due each of them at least about half of limit and of the destination's
// cap of it (claimPaced). Each unordered message is a delivery of its
// own; a worker's claims group them by pace (claimPaced).
func (d *Dispatcher) claim(ctx context.Context, worker string, limit int, held map[string]int) ([]group, error) {
	groups, _, err := d.claimPaced(ctx, claimRequest{worker: worker, limit: limit, held: held})
	return groups, err
}

// claimRequest is what a worker asks of a claim (claimPaced).
type claimRequest struct {
	worker string
	limit  int            // most deliveries to lease
	held   map[string]int // the worker's deliveries in flight per destination
	// sizes is how many unordered messages one delivery may run at each
	// destination (worker.groupSizes); 1 where not given. They also say
	// which destinations keep up fast (Dispatcher.orderedShare).
	sizes map[string]int
	// orderedFirst sends the ordered claim before the unordered one: the
	// worker's last claim found ordered messages only, and was not full.
	orderedFirst bool
	// leased, if not nil, is given each statement's deliveries as soon as
	// it returns, to be started while the next statement runs.
	leased func([]group)
}

// claimPaced is claim for a worker that knows how many unordered messages
// one delivery may run at each destination (r.sizes, from its pace):
// unordered messages of a destination that keeps up are leased several to
// a delivery, as an aggregate's are, so that one claim and one finalize
// serve many messages instead of a few. capped says that a destination's
// share (see claimable) left it out of the claim or stopped the claim
// there, or that an ordered statement leased orderedClaimMost of its
// aggregates: it may have more due, to be claimed once deliveries there
// land.
//
// A claim is up to three statements: the kind sent first (unordered
// messages, or aggregates if r.orderedFirst) for half of r.limit and, at
// each destination, at most half of the other kind's cap (the dispatcher's
// kindSplits, unless the other kind was not due there at the last claim),
// the other kind for what is left, and the first kind again for the rest
// if it found all it was allowed. So each kind gets about half of a full
// claim and at least about half of its cap at each destination (all of it
// but the other kind's half where that is the smaller cap: a fast
// destination's aggregates, Dispatcher.orderedShare), what one leaves
// unused goes to the other, neither starves the other, and a claim is full
// when only one kind is waiting. A kind's statement is not sent when one
// before it leased messages and said that none of that kind was due (its
// rows' AggregatesDue, UnorderedDue): where producers enqueue one kind
// only, the other kind's statement found nothing at every claim, a round
// trip per wake-up (BENCHMARKS.md, "The other kind's claim only where it
// is due"). What a statement leased is passed to r.leased before the next
// is sent: a delivery never waits for a statement that finds nothing for
// it (each one a commit; a whole claim took 1.3 ms at the p50 and 12 at
// the p99 under 1,000 messages a second; BENCHMARKS.md, "Planned claims on
// a new outbox" and "A claim's deliveries start as each statement
// returns").
func (d *Dispatcher) claimPaced(ctx context.Context, r claimRequest) (claimed []group, capped bool, err error) {
	caps, atShare := d.claimable(r.limit, r.held, r.sizes)
	if len(caps.names) == 0 || r.limit <= 0 {
		return nil, atShare, nil
	}
	start := time.Now()
	c := &claimStep{d: d, ctx: ctx, r: r, caps: caps}
	// firstLeft is what the first kind has left of each destination's cap
	// as the claim goes on (took lowers it).
	first, second, firstLeft := c.unordered, c.ordered, c.caps.unordered
	if r.orderedFirst {
		first, second, firstLeft = c.ordered, c.unordered, c.caps.ordered
	}
	// On an error, what the statements before it leased is still returned,
	// to be delivered rather than left waiting for its lease to expire.
	half := max(r.limit/2, 1)
	c.first = true
	firstGot, err := first(half)
	c.first = false
	if rest := r.limit - len(c.claimed); err == nil && rest > 0 {
		_, err = second(rest)
	}
	if rest := r.limit - len(c.claimed); err == nil && rest > 0 && (firstGot == half || c.heldWithRoom(firstLeft)) {
		_, err = first(rest)
	}
	if err != nil {
		return c.claimed, false, err
	}
	d.splits.remember(c.caps.names, c.seen)
	d.cfg.Metrics.claimSeconds.Observe(time.Since(start).Seconds())
	d.noteClaimed(messagesIn(c.claimed))
	return c.claimed, atShare || c.atMost || slices.Contains(c.caps.unordered, 0) || slices.Contains(c.caps.ordered, 0), nil
}

// claimStep is a claim in progress (claimPaced): the destinations it may
// lease from, with how many deliveries of each kind each may still take,
// and what its statements have leased so far.
type claimStep struct {
	d       *Dispatcher
	ctx     context.Context
	r       claimRequest
	caps    claimCaps
	claimed []group
	// noneDue, by kind, says the last statement that leased messages of
	// the other kind found none of this one due as of its snapshot
	// (unordered messages: after this dispatcher's marks, where its
	// unordered claim starts): this kind's statement, which would have
	// leased nothing then, is not sent. What is committed later wakes the
	// dispatcher again.
	noneDue [2]bool
	// seen, by kind, is what the claim's statements saw of it, for the
	// dispatcher's splits (kindSplits.remember).
	seen [2]kindSeen
	// atMost says an ordered statement leased orderedClaimMost aggregates
	// of a destination: it may have more due.
	atMost bool
	// first is set while the claim's first statement runs: its caps are
	// the dispatcher's splits' (kindSplits.firstCaps). held marks, by
	// destination, where it leased all they let it, less than its kind's
	// cap: it may have more due there.
	first bool
	held  []bool
}

// reported keeps what a statement's rows said of the other kind, kind:
// due at some of the claim's destinations, or at none.
func (c *claimStep) reported(kind messageKind, due bool) {
	c.noneDue[kind] = !due
	c.seen[kind].reported = &due
}

// looked keeps what a statement of kind leased at each of names, the
// destinations where it had room to lease (leased, by destination): some,
// or none, which says none was due there unless the statement was cut
// short by its budget (cut: it may have stopped before that destination,
// so none of its nones count).
func (c *claimStep) looked(kind messageKind, names []string, leased map[string]int32, cut bool) {
	seen := &c.seen[kind]
	if seen.at == nil {
		seen.at = map[string]bool{}
	}
	for _, name := range names {
		switch _, known := seen.at[name]; {
		case leased[name] > 0:
			seen.at[name] = true
		case !cut && !known:
			seen.at[name] = false
		}
	}
}

// firstCaps is own, the caps of kind, or while the claim's first
// statement runs what the dispatcher's splits let it take of them.
func (c *claimStep) firstCaps(kind messageKind, own, other []int32) []int32 {
	if !c.first {
		return own
	}
	return c.d.splits.firstCaps(c.caps.names, own, other, kind)
}

// noteHeld marks, for the claim's first statement, the destinations where
// it leased as many as it was allowed (leased, in the unit of limits: what
// its SQL was allowed of each) although its caps were less than its
// kind's full caps.
func (c *claimStep) noteHeld(full, caps, limits []int32, leased map[string]int32) {
	if !c.first {
		return
	}
	c.held = make([]bool, len(c.caps.names))
	for i, name := range c.caps.names {
		c.held[i] = caps[i] < full[i] && leased[name] >= limits[i]
	}
}

// heldWithRoom says the first statement was held back at a destination
// where its kind still has room (left, its caps now): it is sent again.
func (c *claimStep) heldWithRoom(left []int32) bool {
	for i, held := range c.held {
		if held && left[i] > 0 {
			return true
		}
	}
	return false
}

// countBy counts xs by key.
func countBy[T any](xs []T, key func(T) string) map[string]int32 {
	n := map[string]int32{}
	for _, x := range xs {
		n[key(x)]++
	}
	return n
}

// orderedClaimMost is the most aggregates of one destination an ordered
// claim statement leases, a constant in its SQL (OutboxClaimOrdered) so
// that its generic plan expects a few: a destination's cap is passed to it
// as at most that, and a destination that got that many counts as capped
// (claimPaced), so that the worker claims again at its next finalize
// instead of at its idle poll. The destination's own cap is not lowered:
// an unordered claim takes from both kinds' caps, and would leave its
// aggregates none.
const orderedClaimMost = 128

// took takes what a statement leased off the destinations' caps of both
// kinds (never below 0: a destination's aggregates may have a larger
// share than its unordered messages), and passes it on to the request's
// leased.
func (c *claimStep) took(groups []group) {
	for _, g := range groups {
		if i := slices.Index(c.caps.names, g.msgs[0].Destination); i >= 0 {
			c.caps.unordered[i] = max(c.caps.unordered[i]-1, 0)
			c.caps.ordered[i] = max(c.caps.ordered[i]-1, 0)
		}
	}
	c.claimed = append(c.claimed, groups...)
	if c.r.leased != nil && len(groups) > 0 {
		c.r.leased(groups)
	}
}

// unordered leases up to n deliveries of unordered messages, and says how
// many it leased.
func (c *claimStep) unordered(n int) (int, error) {
	caps := c.firstCaps(unorderedKind, c.caps.unordered, c.caps.ordered)
	limits := make([]int32, len(caps))
	for i, name := range c.caps.names {
		limits[i] = caps[i] * int32(max(c.r.sizes[name], 1))
	}
	share := unorderedShareOf(c.caps.names, caps, n, c.r.sizes)
	if len(share.names) == 0 || c.noneDue[unorderedKind] {
		c.noteHeld(c.caps.unordered, caps, limits, nil)
		return 0, nil
	}
	rows, err := c.leaseUnordered(share, n)
	if err != nil {
		return 0, fmt.Errorf("claim unordered: %w", err)
	}
	if len(rows) > 0 {
		c.reported(orderedKind, rows[0].AggregatesDue)
	}
	leased := countBy(rows, func(r queries.OutboxClaimUnorderedRow) string { return r.Destination })
	c.looked(unorderedKind, share.names, leased, len(rows) >= n*share.largest)
	c.noteHeld(c.caps.unordered, caps, limits, leased)
	groups, excess := share.group(rows, n)
	c.d.stretches.leased(groups)
	// The deliveries first: a release is a round trip of its own.
	c.took(groups)
	retries, firsts := splitStretched(excess)
	c.d.release(c.ctx, c.r.worker, retries)
	c.d.releaseStretched(c.ctx, c.r.worker, firsts)
	return len(groups), nil
}

// leaseUnordered sends the unordered claim for n deliveries of share,
// from the marks and moving them on: one worker of the dispatcher at a
// time (Dispatcher.unorderedTurn).
func (c *claimStep) leaseUnordered(share unorderedShare, n int) ([]queries.OutboxClaimUnorderedRow, error) {
	release, err := takeTurn(c.ctx, c.d.unorderedTurn)
	if err != nil {
		return nil, err
	}
	defer release()
	from := c.d.marks.start(share.names, time.Now())
	batch := n * share.largest
	rows, err := runUnorderedClaim(c.ctx, c.d, queries.OutboxClaimUnorderedParams{
		Owner: c.r.worker, LeaseSeconds: c.d.cfg.LeaseDuration.Seconds(), Destinations: share.names,
		AfterAt: from.at, AfterID: from.id, Caps: share.messages, BatchSize: int32(batch), Now: c.d.now(),
		AggregateDestinations: c.caps.names,
	})
	if err != nil {
		return nil, err
	}
	c.d.marks.claimed(share.names, share.messages, batch, from, rows, time.Now())
	return rows, nil
}

// takeTurn waits for turn's one slot, or for ctx (the claim's, bounded
// by its timeout: a worker waits out another's statement no longer than
// it would wait for its own), and returns what gives the slot back.
func takeTurn(ctx context.Context, turn chan struct{}) (release func(), err error) {
	select {
	case turn <- struct{}{}:
		return func() { <-turn }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for another worker's claim: %w", context.Cause(ctx))
	}
}

// ordered leases up to n aggregates, each a delivery of its messages in
// order, and says how many it leased.
func (c *claimStep) ordered(n int) (int, error) {
	caps := c.firstCaps(orderedKind, c.caps.ordered, c.caps.unordered)
	limits := make([]int32, len(caps))
	for i, left := range caps {
		limits[i] = min(left, orderedClaimMost)
	}
	// No destination with room left for aggregates (the other kind took
	// it all), or none due: the ordered claim could lease nothing, and is
	// not sent.
	if !slices.ContainsFunc(caps, func(left int32) bool { return left > 0 }) || c.noneDue[orderedKind] {
		c.noteHeld(c.caps.ordered, caps, limits, nil)
		return 0, nil
	}
	// Where the unordered claim would start, for the rows' UnorderedDue.
	from := c.d.marks.start(c.caps.names, time.Now())
	rows, err := c.leaseAggregates(n, limits, from)
	if err != nil {
		return 0, fmt.Errorf("claim ordered: %w", err)
	}
	if len(rows) > 0 {
		c.reported(unorderedKind, rows[0].UnorderedDue)
	}
	if len(rows) > 0 && !rows[0].UnorderedDue {
		// The marks are forgotten as the unordered claim, finding nothing,
		// would have forgotten them: a message behind a mark (its lease
		// expired, or its transaction committed late) is found by the next
		// claim, not once the mark is markAge old.
		c.d.marks.claimed(c.caps.names, c.caps.unordered, 1, from, nil, time.Now())
	}
	groups := groupByAggregate(rows)
	leased := countBy(groups, func(g group) string { return g.msgs[0].Destination })
	for _, got := range leased {
		c.atMost = c.atMost || got == orderedClaimMost
	}
	var withRoom []string
	for i, name := range c.caps.names {
		if limits[i] > 0 {
			withRoom = append(withRoom, name)
		}
	}
	c.looked(orderedKind, withRoom, leased, len(groups) >= n)
	c.noteHeld(c.caps.ordered, caps, limits, leased)
	c.took(groups)
	return len(groups), nil
}

// leaseAggregates sends the ordered claim for n aggregates, at most caps
// of each destination (each at most orderedClaimMost), its probe of the
// unordered messages due starting at from: one worker of the dispatcher at
// a time (Dispatcher.orderedTurn).
func (c *claimStep) leaseAggregates(n int, caps []int32, from claimStart) ([]queries.OutboxClaimOrderedRow, error) {
	release, err := takeTurn(c.ctx, c.d.orderedTurn)
	if err != nil {
		return nil, err
	}
	defer release()
	return runClaim(c.ctx, c.d, (*queries.Queries).OutboxClaimOrdered, queries.OutboxClaimOrderedParams{
		Owner: c.r.worker, LeaseSeconds: c.d.cfg.LeaseDuration.Seconds(), Destinations: c.caps.names, Caps: caps,
		Aggregates: int32(n), PerAggregate: int32(c.d.cfg.AggregateBatch), Now: c.d.now(), AfterAt: from.at, AfterID: from.id,
	})
}
