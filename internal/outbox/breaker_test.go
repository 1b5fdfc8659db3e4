package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/destination/guard"
	"github.com/switchyard/switchyard/internal/testlog"
	"github.com/switchyard/switchyard/internal/testwait"
)

// A destination that keeps failing opens its breaker; while open its
// messages are not claimed and burn no attempts (every attempt counted in
// the database is a call the destination received); a probe closes it once
// the destination recovers; another destination is unaffected throughout.
func TestBreakerHoldsAFailingDestinationAndSparesTheOthers(t *testing.T) {
	t.Parallel()
	pool := setup(t, "down", "up")
	var healthy atomic.Bool
	var calls, callsWhileOpen atomic.Int64
	states := make(chan guard.State, 4096)
	var halfOpens atomic.Int64
	var announced atomic.Int64
	record := BreakerRecorder(pool, "breaker-test", testlog.New(t), func() { announced.Add(1) })
	// One delivery at a time: with several in flight, one admitted while
	// the breaker was closed could see it open (opened by the others'
	// failures) and count as a call while open.
	g, err := guard.New("down", guard.Config{Concurrency: 1, Breaker: guard.BreakerConfig{
		FailureRatio: 0.5, MinRequests: 5, Window: time.Minute, OpenTimeout: 300 * time.Millisecond,
	}}, func(name string, from, to guard.State) {
		record(name, from, to)
		if to == guard.HalfOpen {
			halfOpens.Add(1)
		}
		states <- to
	})
	require.NoError(t, err)
	down := destination.Func(func(context.Context, destination.Delivery) (destination.Outcome, error) {
		calls.Add(1)
		if g.State() != guard.Closed {
			callsWhileOpen.Add(1)
		}
		if healthy.Load() {
			return destination.Outcome{StatusCode: 200}, nil
		}
		return destination.Outcome{StatusCode: 503}, errors.New("HTTP 503: down for maintenance")
	})
	up := destination.Func(func(context.Context, destination.Delivery) (destination.Outcome, error) {
		return destination.Outcome{StatusCode: 200}, nil
	})
	var msgs []Message
	for i := range 40 {
		msgs = append(msgs, Message{Topic: "t", Destination: "down", Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	enqueue(t, pool, msgs...)
	startDispatcher(t, pool, Config{Workers: 2, BatchSize: 10, Routes: map[string]Route{
		"down": {Destination: down, Retry: fastRetry(1000), Guard: g},
		"up":   {Destination: up, Retry: fastRetry(3)},
	}})
	waitState(t, states, guard.Open)

	// While it is open, the other destination flows.
	var later []Message
	for i := range 40 {
		later = append(later, Message{Topic: "t", Destination: "up", Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	enqueue(t, pool, later...)
	testwait.Until(t, time.Minute, "the healthy destination delivered", func() bool {
		return countWhere(t, pool, "destination = 'up' AND state = 'delivered'") == 40
	})
	waitState(t, states, guard.HalfOpen) // at least one probe was admitted and failed
	require.Zero(t, countWhere(t, pool, "destination = 'down' AND state <> 'pending'"))

	healthy.Store(true)
	waitState(t, states, guard.Closed)
	testwait.Until(t, time.Minute, "the recovered destination delivered", func() bool {
		return countWhere(t, pool, "destination = 'down' AND state = 'delivered'") == 40
	})
	var attempts int64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT sum(attempts) FROM switchyard.outbox WHERE destination = 'down'`).Scan(&attempts))
	require.Equal(t, calls.Load(), attempts, "an attempt is counted only when the destination was called")
	require.LessOrEqual(t, callsWhileOpen.Load(), halfOpens.Load(), "while not closed, only one probe per half-open spell reaches the destination")
	testwait.Until(t, 10*time.Second, "breaker changes recorded", func() bool {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(DISTINCT to_state) FROM switchyard.breaker_events
			WHERE destination = 'down' AND owner = 'breaker-test'`).Scan(&n))
		return n == 3
	})
	// Each recorded change is on the change feed too, announced after its
	// commit.
	var events, feed int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM switchyard.breaker_events WHERE destination = 'down'),
		(SELECT count(*) FROM switchyard.changes WHERE kind = 'breaker' AND subject = 'down')`).Scan(&events, &feed))
	require.Equal(t, events, feed)
	testwait.Until(t, 10*time.Second, "every change announced", func() bool { return announced.Load() == events })
}

func waitState(t *testing.T, states <-chan guard.State, want guard.State) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case s := <-states:
			if s == want {
				return
			}
		case <-deadline:
			t.Fatalf("breaker never reached %v", want)
		}
	}
}
