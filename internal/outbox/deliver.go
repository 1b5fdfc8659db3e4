package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/fingerprint"
)

// Outcomes a delivery attempt can end in; they are the outcome column of
// switchyard.outbox_attempt_log (the delivered attempt that applied is on
// the message's row, every other in switchyard.outbox_attempts).
const (
	outcomeDelivered = "delivered"
	outcomeRetry     = "retry"
	outcomeDead      = "dead"
	outcomeReleased  = "released" // never started: the attempt is given back
)

// releasePause is how long a message refused by its destination's guard
// waits before it may be claimed again.
const releasePause = time.Second

// maxErrorBytes bounds the error text stored per attempt.
const maxErrorBytes = 2048

// result is what happened to one claimed message.
type result struct {
	msg         claimedMessage
	outcome     string
	retryDelay  time.Duration // for retry and released: how long to wait
	err         string
	fingerprint string
	outcomeInfo destination.Outcome
	started     time.Time
	finished    time.Time
	// delivery is the worker's flight that delivered it (worker.finished):
	// a finalize takes all of a delivery's results or none.
	delivery uint64
}

// deliverOne waits for the destination's guard under ctx (so a stopping
// dispatcher releases what has not started) and delivers under hard (so
// what has started may finish within the stop's grace period).
func (d *Dispatcher) deliverOne(ctx, hard context.Context, m claimedMessage) result {
	r := result{msg: m, started: time.Now()}
	if ctx.Err() != nil {
		// Stopping before it started: give the attempt back.
		r.outcome, r.finished = outcomeReleased, r.started
		return r
	}
	route, ok := d.route(m.Destination)
	if !ok {
		// Only routed destinations are claimed; a route removed since
		// counts as a failed attempt, retried with the default policy.
		return d.classify(hard, r, m, Route{}, fmt.Errorf("no route to destination %q", m.Destination))
	}
	release := func(success, counted bool) {}
	if route.Guard != nil {
		var err error
		if release, err = route.Guard.Acquire(ctx); err != nil {
			// Breaker open (or stopping): the attempt never started, so
			// it is given back. A second's pause keeps a half-open
			// breaker's refused messages from churning through claims.
			r.outcome, r.retryDelay, r.finished = outcomeReleased, releasePause, time.Now()
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
	return d.classify(hard, r, m, route, err)
}

// classify turns a delivery's error into the message's next state: delivered,
// dead (permanent error or attempts exhausted) or a retry after backoff.
func (d *Dispatcher) classify(ctx context.Context, r result, m claimedMessage, route Route, err error) result {
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
	case ctx.Err() != nil:
		// Our own stop cut the delivery short: it says nothing about the
		// message, so it is retried at once elsewhere, even on its last
		// attempt.
		r.outcome = outcomeRetry
	case destination.IsPermanent(err):
		r.outcome = outcomeDead
	case policy.Exhausted(int(m.Attempts)):
		r.outcome = outcomeDead
		r.err = truncate(fmt.Sprintf("gave up after %d attempts: %s", m.Attempts, r.err), maxErrorBytes)
	default:
		r.outcome = outcomeRetry
		r.retryDelay = policy.Delay(int(m.Attempts), d.cfg.Random)
	}
	return r
}

func toDelivery(m claimedMessage) destination.Delivery {
	var headers map[string]string
	if string(m.Headers) != "{}" { // most messages have none: skip the decoder
		_ = json.Unmarshal(m.Headers, &headers) // the schema guarantees an object
	}
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
