package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/internal/destination"
)

// benchHTTPFloor is what signed HTTP to the bench's receiver costs with no
// database and no dispatcher (--http-floor): the drain's messages sent
// again straight through the same webhook destination, as many at once
// as the destination's bulkhead lets the dispatcher send. The HTTP drain
// can cost no less per message than the no-op drain and this together:
// its floor (issue 17, target 4; tools/peers --http).
type benchHTTPFloor struct {
	// Requests the receiver verified (then answered 204): every one
	// sent, or the floor fails.
	Requests       int     `json:"requests"`
	Concurrency    int     `json:"concurrency"`
	Seconds        float64 `json:"seconds"`
	RequestsPerSec float64 `json:"requests_per_sec"`
	// This process's CPU (user + system) per 1,000 requests: the webhook
	// client's and the receiver's, both in this process.
	GoMsPer1k float64 `json:"go_ms_per_1k_requests"`
	Method    string  `json:"method"`
}

const httpFloorMethod = "after the drain, the same number of deliveries (the drain's payloads, a new message id each, made before the clock starts) " +
	"sent by --concurrency goroutines straight through the drain's webhook destination (signed, to the same receiver, " +
	"which verifies them), no database or dispatcher involved; the process's CPU from getrusage over those requests"

// httpFloor sends n deliveries like the drain's through b's webhook
// destination, concurrency at a time, and measures them. The deliveries
// are made before the clock starts, and the first failure stops the rest.
func (b *benchRun) httpFloor(ctx context.Context) (benchHTTPFloor, error) {
	n, concurrency := b.opts.messages, b.opts.concurrency
	f := benchHTTPFloor{Concurrency: concurrency, Method: httpFloorMethod}
	deliveries := make([]destination.Delivery, n)
	for i := range deliveries {
		m := benchMessage(b.target.destinationName(), i, b.opts.aggregates)
		deliveries[i] = destination.Delivery{MessageID: uuid.NewString(), Topic: m.Topic, AggregateType: m.AggregateType,
			AggregateID: m.AggregateID, Payload: m.Payload, Attempt: 1, EnqueuedAt: time.Now()}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, b.opts.timeout, errors.New("the http floor took longer than --timeout"))
	defer cancel()
	runtime.GC() // the drain's garbage, collected before the clock starts
	verifiedBefore := b.receiver.verified.Load()
	startCPU, err := selfCPU()
	if err != nil {
		return f, err
	}
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failure error
	var failOnce sync.Once
	for range concurrency {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				if _, err := b.webhook.Deliver(ctx, deliveries[i]); err != nil {
					failOnce.Do(func() {
						failure = fmt.Errorf("http floor: delivery %d: %w", i, err)
						cancel()
					})
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failure != nil {
		return f, failure
	}
	if err := context.Cause(ctx); err != nil {
		return f, fmt.Errorf("http floor: %w", err)
	}
	endCPU, err := selfCPU()
	if err != nil {
		return f, err
	}
	if f.Requests = int(b.receiver.verified.Load() - verifiedBefore); f.Requests != n {
		return f, fmt.Errorf("http floor: the receiver verified %d requests of %d", f.Requests, n)
	}
	f.Seconds = benchRound(elapsed.Seconds(), 3)
	f.RequestsPerSec = benchRound(float64(n)/elapsed.Seconds(), 0)
	f.GoMsPer1k = benchRound(float64((endCPU-startCPU).Microseconds())/float64(n), 1)
	return f, nil
}
