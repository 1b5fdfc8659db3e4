package outbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/switchyard/switchyard/internal/queries"
)

// flushInterval bounds how long a finished delivery waits to be finalized
// together with others.
const flushInterval = 10 * time.Millisecond

// worker is one claim-deliver-finalize loop. It keeps up to BatchSize
// deliveries in flight, each on its own goroutine (a message, or an
// aggregate's messages in order), claims again when half its capacity is
// free, and finalizes finished deliveries in groups: one slow delivery
// holds one slot, never a whole batch. Its fields are touched only by its
// own goroutine.
type worker struct {
	d        *Dispatcher
	name     string
	results  chan []result
	groups   int                      // deliveries in flight
	inFlight map[int64]claimedMessage // their messages, by id
	done     []result
	// nextClaim holds off claiming after a claim found nothing, until the
	// idle poll or a wake-up.
	nextClaim time.Time
}

func (d *Dispatcher) work(ctx context.Context, name string) {
	w := &worker{d: d, name: name, results: make(chan []result, d.cfg.BatchSize), inFlight: map[int64]claimedMessage{}}
	d.mu.Lock()
	hard := d.hardCtx
	d.mu.Unlock()
	beat := time.NewTicker(d.cfg.LeaseDuration / 3)
	defer beat.Stop()
	flush := time.NewTicker(flushInterval)
	defer flush.Stop()
	stop := ctx.Done()
	for {
		stopping := ctx.Err() != nil
		if !stopping {
			w.claimIfRoom(ctx, hard)
		}
		if stopping && len(w.inFlight) == 0 {
			w.finalize()
			return
		}
		select {
		case rs := <-w.results:
			w.finished(rs)
		case <-flush.C:
			w.finalize()
		case <-beat.C:
			w.extendLeases(hard)
		case <-d.wake:
			w.nextClaim = time.Time{}
		case <-w.idle():
		case <-stop:
			stop = nil // seen; from now on only deliveries in flight matter
		}
	}
}

// claimIfRoom claims when at least half the worker's capacity is free.
func (w *worker) claimIfRoom(ctx, hard context.Context) {
	room := w.d.cfg.BatchSize - w.groups
	if room < max(w.d.cfg.BatchSize/2, 1) || time.Now().Before(w.nextClaim) {
		return
	}
	// The claim itself is not cancelled by a stop: a claim cancelled after
	// the server ran it would leave leases nobody knows about. What a
	// stopping worker claimed is released at once by deliverOne.
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.d.cfg.LeaseDuration/3)
	claimed, err := w.d.claim(claimCtx, w.name, room)
	cancel()
	if err != nil {
		// What was claimed before the error is still delivered below.
		w.d.cfg.Logger.Error("claim failed", slog.String("worker", w.name), slog.Any("error", err))
	}
	if len(claimed) == 0 {
		w.nextClaim = time.Now().Add(w.d.cfg.IdlePoll)
		return
	}
	if len(claimed) == room {
		// There may be more: let another worker look.
		w.d.Wake()
	}
	w.groups += len(claimed)
	for _, g := range claimed {
		w.d.hold(g.msgs[0].Destination, 1)
		w.d.inFlight.Add(int64(len(g.msgs)))
		for _, m := range g.msgs {
			w.inFlight[m.ID] = m
		}
		go func() { w.results <- w.d.deliverGroup(ctx, hard, g) }()
	}
}

// idle fires when the worker has nothing in flight and may claim again.
func (w *worker) idle() <-chan time.Time {
	if len(w.inFlight) > 0 || w.nextClaim.IsZero() {
		return nil
	}
	return time.After(time.Until(w.nextClaim))
}

func (w *worker) finished(rs []result) {
	w.groups--
	w.d.hold(rs[0].msg.Destination, -1)
	for _, r := range rs {
		delete(w.inFlight, r.msg.ID)
	}
	w.done = append(w.done, rs...)
	if len(w.done) >= max(w.d.cfg.BatchSize/2, 1) || w.groups == 0 {
		w.finalize()
	}
}

// finalize applies the finished deliveries, even while stopping: their
// outcomes happened.
func (w *worker) finalize() {
	if len(w.done) == 0 {
		return
	}
	if err := w.d.finalize(context.Background(), w.name, w.done); err != nil {
		// The leases expire and the messages are claimed again: at least
		// once, never lost.
		w.d.cfg.Logger.Error("finalize failed", slog.String("worker", w.name), slog.Any("error", err))
	} else {
		// A finalized head lets its aggregate's next message be claimed:
		// no need to wait for the idle poll.
		w.nextClaim = time.Time{}
	}
	w.d.inFlight.Add(-int64(len(w.done)))
	w.done = w.done[:0]
}

// extendLeases is the heartbeat of the deliveries in flight: of each
// unordered message's lease, and of each aggregate's, which covers its
// messages.
func (w *worker) extendLeases(ctx context.Context) {
	if len(w.inFlight) == 0 {
		return
	}
	lease, now := w.d.cfg.LeaseDuration.Seconds(), w.d.now()
	messages := queries.OutboxExtendLeasesParams{LeaseSeconds: lease, Now: now}
	aggregates := queries.OutboxExtendAggregateLeasesParams{LeaseSeconds: lease, Now: now}
	seen := map[aggregateKey]bool{}
	for _, m := range w.inFlight {
		if m.AggregateID == "" {
			messages.Ids = append(messages.Ids, m.ID)
			messages.LeaseVersions = append(messages.LeaseVersions, m.LeaseVersion)
			continue
		}
		if k := keyOf(m); !seen[k] {
			seen[k] = true
			aggregates.Destinations = append(aggregates.Destinations, k.destination)
			aggregates.AggregateTypes = append(aggregates.AggregateTypes, k.aggregateType)
			aggregates.AggregateIds = append(aggregates.AggregateIds, k.aggregateID)
			aggregates.LeaseVersions = append(aggregates.LeaseVersions, m.AggregateLeaseVersion)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	q := queries.New(w.d.pool)
	var err error
	if len(messages.Ids) > 0 {
		_, err = q.OutboxExtendLeases(ctx, messages)
	}
	if len(aggregates.Destinations) > 0 && err == nil {
		_, err = q.OutboxExtendAggregateLeases(ctx, aggregates)
	}
	if err != nil && ctx.Err() == nil {
		w.d.cfg.Logger.Warn("extend leases failed", slog.String("worker", w.name), slog.Any("error", err))
	}
}
