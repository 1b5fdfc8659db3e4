package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/fingerprint"
	"github.com/switchyard/switchyard/internal/queries"
)

// Outcomes a delivery attempt can end in; they are the outcome column of
// switchyard.outbox_attempts.
const (
	outcomeDelivered = "delivered"
	outcomeRetry     = "retry"
	outcomeDead      = "dead"
	outcomeReleased  = "released" // never started: the attempt is given back
)

// maxErrorBytes bounds the error text stored per attempt.
const maxErrorBytes = 2048

// result is what happened to one claimed message.
type result struct {
	msg         claimedMessage
	outcome     string
	nextAttempt time.Time
	err         string
	fingerprint string
	outcomeInfo destination.Outcome
	started     time.Time
	finished    time.Time
}

// deliverBatch delivers every claimed message concurrently (a batch holds
// at most one message per aggregate, so they are independent) while a
// heartbeat extends their leases. Deliveries run under hard, which Stop
// cancels only after its grace period; a message not yet started when ctx
// ends is released.
func (d *Dispatcher) deliverBatch(ctx, hard context.Context, batch []claimedMessage) []result {
	results := make([]result, len(batch))
	stopBeat := d.heartbeat(hard, batch)
	defer stopBeat()
	var wg sync.WaitGroup
	for i, m := range batch {
		if ctx.Err() != nil {
			results[i] = result{msg: m, outcome: outcomeReleased, nextAttempt: time.Now(), started: time.Now(), finished: time.Now()}
			continue
		}
		wg.Go(func() { results[i] = d.deliverOne(ctx, hard, m) })
	}
	wg.Wait()
	return results
}

// deliverOne waits for the destination's guard under ctx (so a stopping
// dispatcher releases what has not started) and delivers under hard (so
// what has started may finish within the stop's grace period).
func (d *Dispatcher) deliverOne(ctx, hard context.Context, m claimedMessage) result {
	r := result{msg: m, started: time.Now()}
	route, ok := d.cfg.Routes[m.Destination]
	if !ok {
		// Only routed destinations are claimed; a route removed since
		// counts as a failed attempt, retried with the default policy.
		return d.classify(r, m, Route{}, fmt.Errorf("no route to destination %q", m.Destination))
	}
	release := func(success, counted bool) {}
	if route.Guard != nil {
		var err error
		if release, err = route.Guard.Acquire(ctx); err != nil {
			// Breaker open (or stopping): the attempt never started, so
			// it is given back and the message waits.
			r.outcome, r.nextAttempt, r.finished = outcomeReleased, time.Now(), time.Now()
			return r
		}
	}
	timeout := route.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	attemptCtx, cancel := context.WithTimeout(hard, timeout)
	defer cancel()
	r.started = time.Now()
	outcome, err := route.Destination.Deliver(attemptCtx, toDelivery(m))
	// The breaker counts only what says something about the destination's
	// health: not our own cancellation, not a message the receiver refused.
	release(err == nil, !(destination.IsPermanent(err) || (err != nil && hard.Err() != nil)))
	r.outcomeInfo = outcome
	d.cfg.Metrics.deliverySeconds.WithLabelValues(m.Destination).Observe(time.Since(r.started).Seconds())
	return d.classify(r, m, route, err)
}

// classify turns a delivery's error into the message's next state: delivered,
// dead (permanent error or attempts exhausted) or a retry after backoff.
func (d *Dispatcher) classify(r result, m claimedMessage, route Route, err error) result {
	r.finished = time.Now()
	if err == nil {
		r.outcome = outcomeDelivered
		return r
	}
	r.err = truncate(err.Error(), maxErrorBytes)
	r.fingerprint = fingerprint.Of(r.err)
	policy := route.Retry.WithDefaults()
	if m.MaxAttempts != nil {
		policy.MaxAttempts = int(*m.MaxAttempts)
	}
	switch {
	case destination.IsPermanent(err):
		r.outcome = outcomeDead
	case policy.Exhausted(int(m.Attempts)):
		r.outcome = outcomeDead
		r.err = truncate(fmt.Sprintf("gave up after %d attempts: %s", m.Attempts, r.err), maxErrorBytes)
	case errors.Is(err, context.Canceled):
		// Stopped mid-delivery: retry soon, somewhere else.
		r.outcome, r.nextAttempt = outcomeRetry, r.finished
	default:
		r.outcome = outcomeRetry
		r.nextAttempt = r.finished.Add(policy.Delay(int(m.Attempts), d.cfg.Random))
	}
	return r
}

func toDelivery(m claimedMessage) destination.Delivery {
	var headers map[string]string
	_ = json.Unmarshal(m.Headers, &headers) // the schema guarantees an object
	return destination.Delivery{
		MessageID:     m.MessageID.String(),
		Topic:         m.Topic,
		AggregateType: m.AggregateType,
		AggregateID:   m.AggregateID,
		Payload:       m.Payload,
		Headers:       headers,
		Attempt:       int(m.Attempts),
		EnqueuedAt:    m.CreatedAt,
	}
}

// heartbeat extends the batch's leases every third of the lease duration
// until the returned stop is called.
func (d *Dispatcher) heartbeat(ctx context.Context, batch []claimedMessage) (stop func()) {
	ids := make([]int64, len(batch))
	versions := make([]int64, len(batch))
	for i, m := range batch {
		ids[i], versions[i] = m.ID, m.LeaseVersion
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(d.cfg.LeaseDuration / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			_, err := queries.New(d.pool).OutboxExtendLeases(ctx, queries.OutboxExtendLeasesParams{
				LeaseSeconds: d.cfg.LeaseDuration.Seconds(), Ids: ids, LeaseVersions: versions, Now: d.now(),
			})
			if err != nil && ctx.Err() == nil {
				d.cfg.Logger.Warn("extend leases failed", "error", err)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
