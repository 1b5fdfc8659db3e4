package outbox

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/switchyard/switchyard/internal/queries"
)

// flushInterval bounds how long a finished delivery waits to be finalized
// together with others, from when the first of those waiting landed (the
// last delivery in flight is finalized at once: finalizeNow). Timed from
// a fixed tick, a flush came a moment after the first of a claim's
// deliveries had landed as often as not, and a drain's claims of
// unordered messages were finalized in two statements instead of one
// (BENCHMARKS.md, "A claim's deliveries in one finalize"); and an idle
// worker woke a hundred times a second.
const flushInterval = 5 * time.Millisecond

// finalizeMost is how many finished messages make a worker finalize before
// its next flush. Each finalize that cannot be sent as genericChunksMost
// statements of genericPlanMost messages (genericChunks) is a statement
// the server plans anew (its parameters are arrays; a custom plan of its
// many CTEs costs about 2 ms) and a round trip: finalizing every 50
// messages, as this did when it counted half a window of deliveries in
// messages, cost a third of the drain's CPU (BENCHMARKS.md, "Finalize per
// flush"). The flush already bounds the wait; this only bounds a
// statement's size, which may pass it by less than a delivery
// (startFinalize).
const finalizeMost = 1000

// worker is one claim-deliver-finalize loop. It keeps up to BatchSize
// deliveries in flight, each on its own goroutine (unordered messages of
// one destination, as many as its pace allows, or an aggregate's messages
// in order), claims again when half its capacity is free and something
// may be due (see claimIfRoom), and finalizes finished deliveries in
// groups: one slow delivery holds one slot, never a whole batch. A
// finalize runs on a goroutine of its own, one at a time (startFinalize),
// while the loop goes on claiming and beating. Its fields are touched only
// by its own goroutine.
type worker struct {
	d       *Dispatcher
	name    string
	results chan landed
	flights map[uint64]*flight // deliveries in flight
	held    map[string]int     // deliveries in flight per destination
	// pace is, per destination, how long a delivery there took recently
	// per message tried (a moving average), and ramp how many unordered
	// messages a delivery may run there: 1 after a failure, doubled by
	// each delivery that went through. Claims size unordered groups by
	// both (groupSizes).
	pace   map[string]time.Duration
	ramp   map[string]int
	nextID uint64
	// done are the finished deliveries not yet sent to a finalize.
	done []result
	// finalizing says a finalize is in flight; finalized receives its
	// outcome (startFinalize). flushDue says the flush came meanwhile:
	// the outcome starts the next finalize at once.
	finalizing bool
	finalized  chan finalizeOutcome
	flushDue   bool
	// flushTimer is set while finished deliveries wait in done, to fire
	// at flushAt (zero while it is stopped): armFlush sets it
	// flushInterval after the first of them landed, or was held back;
	// startFinalize stops it when it takes them all, and flush when it
	// fires.
	flushTimer *time.Timer
	flushAt    time.Time
	// nextClaim holds off claiming after a claim that was not full, until
	// the idle poll, a wake-up or a finalize that makes more due.
	nextClaim time.Time
	// capped is whether the last claim stopped at a destination's share,
	// or at an ordered statement's most aggregates of one destination
	// (claimPaced): the next finalize claims again.
	capped bool
	// orderedFirst is whether the last claim that found anything found
	// ordered messages only, and fewer than the worker had room for: the
	// next claim asks for them first (claimRequest).
	orderedFirst bool
}

// flight is one delivery in flight and what its heartbeat knows of it.
type flight struct {
	g group
	// leasedUntil is when its lease ends, by this process's clock, as of the
	// last claim or extension that the database confirmed.
	leasedUntil time.Time
	// cancel stops the delivery: its lease is lost, and another worker may
	// be delivering the same messages.
	cancel context.CancelFunc
}

// landed is a finished flight's results.
type landed struct {
	id      uint64
	results []result
	elapsed time.Duration // from the flight's start to its last result
}

// newWorker is a worker of d with nothing in flight.
func newWorker(d *Dispatcher, name string) *worker {
	flush := time.NewTimer(flushInterval)
	flush.Stop()
	return &worker{d: d, name: name, results: make(chan landed, d.cfg.BatchSize), flights: map[uint64]*flight{}, held: map[string]int{},
		pace: map[string]time.Duration{}, ramp: map[string]int{}, finalized: make(chan finalizeOutcome, 1), flushTimer: flush}
}

func (d *Dispatcher) work(ctx context.Context, name string) {
	w := newWorker(d, name)
	d.mu.Lock()
	hard := d.hardCtx
	d.mu.Unlock()
	beat := time.NewTicker(d.cfg.LeaseDuration / 3)
	defer beat.Stop()
	defer w.flushTimer.Stop()
	stop := ctx.Done()
	for {
		stopping := ctx.Err() != nil
		if !stopping {
			w.claimIfRoom(ctx, hard)
		}
		if stopping && len(w.flights) == 0 {
			w.finalizeAll()
			return
		}
		select {
		case l := <-w.results:
			w.finished(l)
		case o := <-w.finalized:
			w.applyFinalize(o)
		case <-w.flushTimer.C:
			w.flush()
		case <-beat.C:
			w.extendLeases(hard)
		case <-w.wakeups():
			w.nextClaim = time.Time{}
		case <-w.idle():
		case <-stop:
			stop = nil // seen; from now on only deliveries in flight matter
		}
	}
}

// claimIfRoom claims when the worker has room (see hasRoom).
func (w *worker) claimIfRoom(ctx, hard context.Context) {
	if !w.hasRoom() || time.Now().Before(w.nextClaim) {
		return
	}
	room := w.d.cfg.BatchSize - len(w.flights)
	// The claim itself is not cancelled by a stop: a claim cancelled after
	// the server ran it would leave leases nobody knows about. What a
	// stopping worker claimed is released at once by deliverOne.
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.d.cfg.LeaseDuration/3)
	leasedUntil := time.Now().Add(w.d.cfg.LeaseDuration)
	claimed, capped, err := w.d.claimPaced(claimCtx, claimRequest{
		worker: w.name, limit: room, held: w.held, sizes: w.groupSizes(), orderedFirst: w.orderedFirst,
		// Each statement's deliveries start before the next statement is
		// sent (and so before the claim's error, if any).
		leased: func(groups []group) {
			for _, g := range groups {
				w.launch(ctx, hard, g, leasedUntil)
			}
		},
	})
	cancel()
	w.capped = capped
	if err != nil {
		w.d.cfg.Logger.Error("claim failed", slog.String("worker", w.name), slog.Any("error", err))
	}
	if len(claimed) == 0 {
		w.nextClaim = time.Now().Add(w.d.cfg.IdlePoll)
		return
	}
	// Under a backlog (a full claim) which kind comes first changes no
	// delivery's wait, and unordered first keeps a claim of aggregates
	// alone at two statements (the second for all the room the first
	// left) where ordered first would take three (half, nothing, the
	// rest).
	w.orderedFirst = len(claimed) < room && !slices.ContainsFunc(claimed, func(g group) bool { return g.msgs[0].AggregateID == "" })
	if len(claimed) == room {
		// There may be more: let another worker look.
		w.d.Wake()
	} else {
		// The claim took all that was due, or all that a destination's
		// share or the ordered statement's constant let it (capped): what
		// is due later comes with a wake-up (an enqueue's NOTIFY), a
		// finalize (an aggregate's next message, or room again at a capped
		// destination) or the idle poll (a retry). Claiming again at once,
		// as the loop did, sent an empty claim after almost every claim
		// under offered load.
		w.nextClaim = time.Now().Add(w.d.cfg.IdlePoll)
	}
}

// launch delivers g on a goroutine of its own, as a flight whose lease runs
// until leasedUntil unless the heartbeat extends it.
func (w *worker) launch(ctx, hard context.Context, g group, leasedUntil time.Time) {
	w.held[g.msgs[0].Destination]++
	w.d.inFlight.Add(int64(len(g.msgs)))
	// Both contexts end when the lease is lost: before the delivery starts
	// (it is released) or during it (it is cut short).
	gctx, cancelWait := context.WithCancel(ctx)
	ghard, cancelDelivery := context.WithCancel(hard)
	id := w.nextID
	w.nextID++
	w.flights[id] = &flight{g: g, leasedUntil: leasedUntil, cancel: func() {
		cancelWait()
		cancelDelivery()
	}}
	go func() {
		start := time.Now()
		results := w.d.deliverGroup(gctx, ghard, g)
		w.results <- landed{id: id, results: results, elapsed: time.Since(start)}
	}()
}

// wakeups is the dispatcher's wake-up channel while this worker has room
// to claim, else nil: a full worker must leave the one pending wake-up to
// a worker that can act on it.
func (w *worker) wakeups() <-chan struct{} {
	if !w.hasRoom() {
		return nil
	}
	return w.d.wake
}

// hasRoom reports whether at least half the worker's window is free: it
// claims only then, so that claims stay large.
func (w *worker) hasRoom() bool {
	return w.d.cfg.BatchSize-len(w.flights) >= max(w.d.cfg.BatchSize/2, 1)
}

// idle fires when the worker has nothing in flight and may claim again.
func (w *worker) idle() <-chan time.Time {
	if len(w.flights) > 0 || w.nextClaim.IsZero() {
		return nil
	}
	return time.After(time.Until(w.nextClaim))
}

func (w *worker) finished(l landed) {
	if f, ok := w.flights[l.id]; ok {
		f.cancel()
		delete(w.flights, l.id)
	}
	w.held[l.results[0].msg.Destination]--
	w.clock(l)
	for i := range l.results {
		l.results[i].delivery = l.id
	}
	w.done = append(w.done, l.results...)
	if w.finalizeNow() {
		w.startFinalize()
	}
	w.armFlush()
}

// armFlush sets the flush timer when finished deliveries wait for a
// finalize and it is not set yet: the first of them waits flushInterval
// at most, or, with a finalize in flight when it fires, until that
// finalize's outcome starts the next.
func (w *worker) armFlush() {
	if len(w.done) > 0 && w.flushAt.IsZero() {
		w.flushAt = time.Now().Add(flushInterval)
		w.flushTimer.Reset(flushInterval)
	}
}

// finalizeNow reports whether the finished deliveries should be finalized
// before the next flush: they are a full finalize, or the last in flight
// (nothing else is coming to share the statement with).
func (w *worker) finalizeNow() bool {
	return len(w.done) >= finalizeMost || len(w.flights) == 0
}

// clock updates the pace of the landed flight's destination: the flight's
// time (waits for the destination's bulkhead and rate limit included) per
// message it tried. A failure forgets the pace and the ramp: the
// destination gets one message per delivery again, and twice as many after
// each delivery that went through, so that a failing or flaky destination,
// whose groups stop at their first failure, does not have many messages
// leased only to be released. A flight that tried nothing says nothing.
func (w *worker) clock(l landed) {
	name := l.results[0].msg.Destination
	tried := 0
	for _, r := range l.results {
		switch r.outcome {
		case outcomeReleased:
		case outcomeDelivered:
			tried++
		default:
			delete(w.pace, name)
			delete(w.ramp, name)
			return
		}
	}
	if tried == 0 {
		return
	}
	sample := max(l.elapsed/time.Duration(tried), time.Nanosecond)
	if last, ok := w.pace[name]; ok {
		sample = last + (sample-last)/4
	}
	w.pace[name] = sample
	w.ramp[name] = min(2*max(w.ramp[name], 1), w.d.cfg.AggregateBatch)
}

// groupSizes are the unordered group sizes of the destinations whose pace
// is known: what their pace allows (unorderedGroupSize), at most their ramp.
func (w *worker) groupSizes() map[string]int {
	sizes := make(map[string]int, len(w.pace))
	for name, pace := range w.pace {
		sizes[name] = min(w.d.unorderedGroupSize(pace), max(w.ramp[name], 1))
	}
	return sizes
}

// finalizeOutcome is what a finalize of results answered (startFinalize).
type finalizeOutcome struct {
	results []result
	busy    []result
	moreDue bool
	err     error
}

// startFinalize sends the finished deliveries, finalizeMost at most (more
// only to end with the whole of a delivery's results), to be finalized
// on a goroutine of its own, unless a finalize is in flight already: its
// outcome starts the next (applyFinalize), or the flush does.
// Finalized on the loop, each finalize held the worker's claims back for a
// round trip: under 1,000 messages a second a wake-up waited up to tens of
// milliseconds for a worker free to claim, and a drain's claims waited
// for every finalize (BENCHMARKS.md, "The finalize off the worker's
// loop").
func (w *worker) startFinalize() {
	if w.finalizing || len(w.done) == 0 {
		return
	}
	n := min(len(w.done), finalizeMost)
	// Never part of a delivery's results (appended together). Of an
	// aggregate's: the finalize of the first part would move the aggregate
	// on and free it, a claim would lease the rest again, and their own
	// finalize would be stale, the messages delivered twice. Of unordered
	// messages': a claim of 32 deliveries of 32 was finalized as 1,000
	// and then 24 (BENCHMARKS.md, "A claim's deliveries in one finalize").
	for n < len(w.done) && w.done[n].delivery == w.done[n-1].delivery {
		n++
	}
	// Capped at n, so that results appended to the rest never reach it.
	batch := w.done[:n:n]
	w.done = w.done[n:]
	if len(w.done) == 0 && !w.flushAt.IsZero() {
		// Nothing waits: no flush. (Since Go 1.23 a stopped timer
		// delivers no value it had not delivered.)
		w.flushTimer.Stop()
		w.flushAt = time.Time{}
	}
	w.finalizing, w.flushDue = true, false
	go func() {
		busy, moreDue, err := w.d.finalize(context.Background(), w.name, batch)
		w.finalized <- finalizeOutcome{results: batch, busy: busy, moreDue: moreDue, err: err}
	}()
}

// flush is the flush timer's: it finalizes the finished deliveries, or,
// with a finalize in flight, has its outcome start the next at once.
func (w *worker) flush() {
	w.flushTimer.Stop()
	w.flushAt = time.Time{}
	w.flushDue = w.finalizing
	w.startFinalize()
	// What a full finalize left behind is as overdue: its outcome
	// starts the next at once.
	w.flushDue = w.flushDue || len(w.done) > 0
}

// applyFinalize takes in the outcome of the finalize in flight (settle),
// keeps what an enqueuing transaction held back for the next finalize, at
// the next flush at the earliest (its aggregate's lease may run out
// meanwhile: the messages are then delivered again, at least once), and
// starts the next finalize at once if the deliveries that finished
// meanwhile call for it, or the flush came meanwhile.
func (w *worker) applyFinalize(o finalizeOutcome) {
	w.settle(o)
	finishedMeanwhile := len(w.done) > 0
	w.done = append(w.done, o.busy...)
	if finishedMeanwhile && (w.finalizeNow() || w.flushDue) {
		w.startFinalize()
	}
	w.armFlush()
}

// settle takes in a finalize's outcome, all but the results it held back.
func (w *worker) settle(o finalizeOutcome) {
	w.finalizing = false
	if o.err != nil {
		// The leases expire and the messages are claimed again: at least
		// once, never lost.
		w.d.cfg.Logger.Error("finalize failed", slog.String("worker", w.name), slog.Any("error", o.err))
	} else {
		if o.moreDue && !w.hasRoom() {
			// Another worker, with room, claims what is due.
			w.d.Wake()
		}
		if o.moreDue || w.capped {
			// A finalized head lets its aggregate's next message be
			// claimed, whose wake-up found the aggregate leased;
			// deliveries that landed at a destination the worker held
			// its share of leave room there: no need to wait for the
			// idle poll.
			w.nextClaim = time.Time{}
		}
	}
	w.d.inFlight.Add(-int64(len(o.results) - len(o.busy)))
}

// finalizeAll waits for the finalize in flight, then finalizes what is
// left, about finalizeMost at a time (startFinalize), even while stopping: their outcomes
// happened. What the finalize in flight held back is tried once more;
// what an enqueuing transaction still holds back after that is left to
// its lease's expiry.
func (w *worker) finalizeAll() {
	if w.finalizing {
		o := <-w.finalized
		w.settle(o)
		w.done = append(w.done, o.busy...)
	}
	for len(w.done) > 0 {
		w.startFinalize()
		w.settle(<-w.finalized)
	}
}

// extendLeases is the heartbeat of the deliveries in flight: of each
// unordered retry's lease, of each stretch's, which covers its first tries,
// and of each aggregate's, which covers its messages. A delivery whose
// lease the database did not extend has lost it to another worker, and
// one whose lease may run out before the next heartbeat (the database
// could not be reached) may lose it any moment: both are cancelled, so
// that no message is delivered by two workers at once. Their finalize
// will be stale and change nothing.
func (w *worker) extendLeases(ctx context.Context) {
	if len(w.flights) == 0 {
		return
	}
	start := time.Now()
	extended, err := w.extend(ctx)
	if err != nil && ctx.Err() == nil {
		w.d.cfg.Logger.Warn("extend leases failed", slog.String("worker", w.name), slog.Any("error", err))
	}
	nextBeat := time.Now().Add(w.d.cfg.LeaseDuration / 3)
	for _, f := range w.flights {
		switch held, lost := f.leaseState(extended); {
		case held:
			f.leasedUntil = start.Add(w.d.cfg.LeaseDuration)
		case lost || !nextBeat.Before(f.leasedUntil):
			w.d.cfg.Logger.Warn("lease lost: delivery cancelled", slog.String("worker", w.name),
				slog.Int64("message", f.g.msgs[0].ID), slog.String("aggregate", f.g.msgs[0].AggregateID))
			f.cancel()
		}
	}
}

// flightKey names what a lease is on: an aggregate, a stretch, or one
// message.
type flightKey struct {
	aggregate aggregateKey
	stretch   int64
	message   int64
}

// keys are the leases a flight holds: its aggregate's, or those of its
// unordered messages: their stretches' (first tries), each retry's own.
func (f *flight) keys() []flightKey {
	if m := f.g.msgs[0]; m.AggregateID != "" {
		return []flightKey{{aggregate: keyOf(m)}}
	}
	keys := make([]flightKey, 0, len(f.g.msgs))
	for _, m := range f.g.msgs {
		k := flightKey{message: m.ID}
		if m.Stretch != 0 {
			k = flightKey{stretch: m.Stretch}
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// leaseState says what a heartbeat's answer (see extend) means for the
// flight: held, every one of its leases was extended; lost, the database
// said one of them was taken over.
func (f *flight) leaseState(extended map[flightKey]bool) (held, lost bool) {
	held = true
	for _, k := range f.keys() {
		ok, known := extended[k]
		held = held && known && ok
		lost = lost || (known && !ok)
	}
	return held, lost
}

// extend runs the heartbeat's statements. The result says, for each flight
// the database could answer about, whether its lease was extended; on an
// error it is empty.
func (w *worker) extend(ctx context.Context) (map[flightKey]bool, error) {
	lease, now := w.d.cfg.LeaseDuration.Seconds(), w.d.now()
	messages := queries.OutboxExtendLeasesParams{LeaseSeconds: lease, Now: now}
	stretches := queries.OutboxExtendStretchesParams{LeaseSeconds: lease, Now: now}
	aggregates := queries.OutboxExtendAggregateLeasesParams{LeaseSeconds: lease, Now: now}
	asked := map[flightKey]bool{}
	for _, f := range w.flights {
		for _, k := range f.keys() {
			if _, ok := asked[k]; !ok && k.stretch != 0 {
				stretches.Ids = append(stretches.Ids, k.stretch)
			}
			asked[k] = false
		}
		m := f.g.msgs[0]
		if m.AggregateID == "" {
			for _, m := range f.g.msgs {
				if m.Stretch == 0 {
					messages.Ids = append(messages.Ids, m.ID)
					messages.LeaseVersions = append(messages.LeaseVersions, m.LeaseVersion)
				}
			}
			continue
		}
		aggregates.Destinations = append(aggregates.Destinations, m.Destination)
		aggregates.AggregateTypes = append(aggregates.AggregateTypes, m.AggregateType)
		aggregates.AggregateIds = append(aggregates.AggregateIds, m.AggregateID)
		aggregates.LeaseVersions = append(aggregates.LeaseVersions, m.AggregateLeaseVersion)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Arrays of every lease held, as large as a finalize's (see
	// customPlans); unlike the finalize, a heartbeat runs once every third
	// of a lease, so planning it each time costs next to nothing.
	q := queries.New(customPlans{w.d.pool})
	if len(messages.Ids) > 0 {
		ids, err := q.OutboxExtendLeases(ctx, messages)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			asked[flightKey{message: id}] = true
		}
	}
	if len(stretches.Ids) > 0 {
		ids, err := q.OutboxExtendStretches(ctx, stretches)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			asked[flightKey{stretch: id}] = true
		}
	}
	if len(aggregates.Destinations) > 0 {
		rows, err := q.OutboxExtendAggregateLeases(ctx, aggregates)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			k := flightKey{aggregate: aggregateKey{r.Destination, r.AggregateType, r.AggregateID}}
			switch r.Status {
			case "extended":
				asked[k] = true
			case "busy":
				// An enqueuing transaction holds the row: nothing is known,
				// the lease runs on as it was.
				delete(asked, k)
			}
		}
	}
	return asked, nil
}
