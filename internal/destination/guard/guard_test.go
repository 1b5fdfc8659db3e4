package guard_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/internal/destination/guard"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// signalTimeout bounds every wait for a signal; the waits end as soon as
// the signal comes, so it only matters when a test fails.
const signalTimeout = 5 * time.Second

type change struct{ from, to guard.State }

type bundle struct {
	g       *guard.Guard
	changes chan change // every state change reported, in order
}

// setup returns a Guard named "dest" whose state changes arrive on changes.
func setup(t *testing.T, cfg guard.Config) bundle {
	t.Helper()
	changes := make(chan change, 100)
	g, err := guard.New("dest", cfg, func(name string, from, to guard.State) {
		assert.Equal(t, "dest", name)
		changes <- change{from, to}
	})
	require.NoError(t, err)
	return bundle{g: g, changes: changes}
}

// expect waits for the next reported change and checks it.
func (b bundle) expect(t *testing.T, from, to guard.State) {
	t.Helper()
	c := testwait.For(t, signalTimeout, fmt.Sprintf("the change %v -> %v", from, to), b.changes)
	require.Equal(t, change{from, to}, c, "next state change")
}

// expectNone checks that no change has been reported.
func (b bundle) expectNone(t *testing.T) {
	t.Helper()
	select {
	case c := <-b.changes:
		t.Fatalf("unexpected state change %v -> %v", c.from, c.to)
	default:
	}
}

// deliver acquires, then releases with the given outcome.
func deliver(t *testing.T, g *guard.Guard, success, counted bool) {
	t.Helper()
	release, err := g.Acquire(context.Background())
	require.NoError(t, err)
	release(success, counted)
}

// quickBreaker opens after 3 counted outcomes of which half failed, and
// admits a probe 50 ms after opening.
func quickBreaker() guard.Config {
	return guard.Config{Breaker: guard.BreakerConfig{MinRequests: 3, OpenTimeout: 50 * time.Millisecond}}
}

// trip opens b's breaker with three failures.
func (b bundle) trip(t *testing.T) {
	t.Helper()
	for range 3 {
		deliver(t, b.g, false, true)
	}
	b.expect(t, guard.Closed, guard.Open)
}

func TestStateString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "closed", guard.Closed.String())
	assert.Equal(t, "half-open", guard.HalfOpen.String())
	assert.Equal(t, "open", guard.Open.String())
	assert.Equal(t, "State(7)", guard.State(7).String())
}

func TestFailuresOpenTheBreaker(t *testing.T) {
	t.Parallel()
	cfg := quickBreaker()
	cfg.Breaker.OpenTimeout = time.Hour
	b := setup(t, cfg)
	assert.Equal(t, guard.Closed, b.g.State())
	assert.True(t, b.g.Claimable())

	deliver(t, b.g, false, true)
	deliver(t, b.g, false, true)
	assert.Equal(t, guard.Closed, b.g.State(), "below MinRequests")
	deliver(t, b.g, false, true)
	b.expect(t, guard.Closed, guard.Open)

	assert.Equal(t, guard.Open, b.g.State())
	assert.False(t, b.g.Claimable())
	_, err := b.g.Acquire(context.Background())
	require.ErrorIs(t, err, guard.ErrOpen)
	assert.Contains(t, err.Error(), `"dest"`)
	b.expectNone(t)
}

func TestFailureRatio(t *testing.T) {
	t.Parallel()
	cfg := quickBreaker()
	cfg.Breaker.MinRequests = 4
	cfg.Breaker.OpenTimeout = time.Hour
	b := setup(t, cfg)
	for range 3 {
		deliver(t, b.g, true, true)
	}
	deliver(t, b.g, false, true) // 1 of 4 failed
	deliver(t, b.g, false, true) // 2 of 5
	assert.Equal(t, guard.Closed, b.g.State())
	b.expectNone(t)
	deliver(t, b.g, false, true) // 3 of 6: the ratio is reached
	b.expect(t, guard.Closed, guard.Open)
}

func TestUncountedOutcomesDoNotOpen(t *testing.T) {
	t.Parallel()
	cfg := quickBreaker()
	cfg.Breaker.MinRequests = 1
	b := setup(t, cfg)
	for range 20 {
		deliver(t, b.g, false, false)
	}
	assert.Equal(t, guard.Closed, b.g.State())
	b.expectNone(t)
}

func TestOutcomesLeaveTheWindow(t *testing.T) {
	t.Parallel()
	cfg := quickBreaker()
	cfg.Breaker.Window = 100 * time.Millisecond
	cfg.Breaker.OpenTimeout = time.Hour
	b := setup(t, cfg)
	deliver(t, b.g, false, true)
	deliver(t, b.g, false, true)
	// Wait for the two failures to leave the window: the wait is the
	// point of this test, so it is a timer, not a signal.
	<-time.After(150 * time.Millisecond)
	deliver(t, b.g, false, true)
	assert.Equal(t, guard.Closed, b.g.State(), "only one failure is left in the window")
	b.expectNone(t)
}

func TestHalfOpenAdmitsOneProbe(t *testing.T) {
	t.Parallel()
	b := setup(t, quickBreaker())
	b.trip(t)
	// Nothing calls the Guard: the change to half-open is reported anyway.
	b.expect(t, guard.Open, guard.HalfOpen)
	assert.True(t, b.g.Claimable(), "half-open with no probe out")

	const callers = 8
	var admitted, refused atomic.Int32
	releases := make(chan func(bool, bool), callers)
	testwait.Together(callers, func(int) {
		release, err := b.g.Acquire(context.Background())
		switch {
		case err == nil:
			admitted.Add(1)
			releases <- release
		case errors.Is(err, guard.ErrOpen):
			refused.Add(1)
		default:
			t.Errorf("Acquire: %v", err)
		}
	})
	require.Equal(t, int32(1), admitted.Load(), "probes admitted")
	require.Equal(t, int32(callers-1), refused.Load(), "callers refused")
	assert.False(t, b.g.Claimable(), "half-open with the probe out")
	assert.Equal(t, guard.HalfOpen, b.g.State())

	(<-releases)(true, true)
	b.expect(t, guard.HalfOpen, guard.Closed)
	assert.True(t, b.g.Claimable())
	deliver(t, b.g, true, true)
	b.expectNone(t)
}

func TestFailedProbeReopens(t *testing.T) {
	t.Parallel()
	b := setup(t, quickBreaker())
	b.trip(t)
	b.expect(t, guard.Open, guard.HalfOpen)

	deliver(t, b.g, false, true)
	b.expect(t, guard.HalfOpen, guard.Open)
	assert.False(t, b.g.Claimable())
	_, err := b.g.Acquire(context.Background())
	require.ErrorIs(t, err, guard.ErrOpen)

	// The open spell starts again, and ends again.
	b.expect(t, guard.Open, guard.HalfOpen)
	deliver(t, b.g, true, true)
	b.expect(t, guard.HalfOpen, guard.Closed)
}

func TestUncountedProbeFreesTheProbe(t *testing.T) {
	t.Parallel()
	b := setup(t, quickBreaker())
	b.trip(t)
	b.expect(t, guard.Open, guard.HalfOpen)

	release, err := b.g.Acquire(context.Background())
	require.NoError(t, err)
	assert.False(t, b.g.Claimable())
	release(false, false) // e.g. our own shutdown cancelled the probe
	assert.Equal(t, guard.HalfOpen, b.g.State())
	assert.True(t, b.g.Claimable())
	deliver(t, b.g, true, true)
	b.expect(t, guard.HalfOpen, guard.Closed)
}

func TestLateOutcomeIsIgnored(t *testing.T) {
	t.Parallel()
	cfg := quickBreaker()
	cfg.Breaker.OpenTimeout = time.Hour
	b := setup(t, cfg)
	slow, err := b.g.Acquire(context.Background())
	require.NoError(t, err)
	b.trip(t)
	slow(true, true) // admitted while closed, ends while open
	assert.Equal(t, guard.Open, b.g.State())
	b.expectNone(t)
}

func TestChangesReportedInOrder(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []change
	// The callback calls the Guard back: that must not deadlock.
	var self atomic.Pointer[guard.Guard]
	b := bundle{changes: make(chan change, 100)}
	g, err := guard.New("dest", quickBreaker(), func(_ string, from, to guard.State) {
		_ = self.Load().State()
		_ = self.Load().Claimable()
		mu.Lock()
		seen = append(seen, change{from, to})
		mu.Unlock()
		b.changes <- change{from, to}
	})
	require.NoError(t, err)
	self.Store(g)
	b.g = g

	b.trip(t)
	b.expect(t, guard.Open, guard.HalfOpen)
	deliver(t, g, false, true)
	b.expect(t, guard.HalfOpen, guard.Open)
	b.expect(t, guard.Open, guard.HalfOpen)
	deliver(t, g, true, true)
	b.expect(t, guard.HalfOpen, guard.Closed)

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []change{
		{guard.Closed, guard.Open},
		{guard.Open, guard.HalfOpen},
		{guard.HalfOpen, guard.Open},
		{guard.Open, guard.HalfOpen},
		{guard.HalfOpen, guard.Closed},
	}, seen)
}

func TestOtherDestinationUnaffected(t *testing.T) {
	t.Parallel()
	cfg := quickBreaker()
	cfg.Breaker.OpenTimeout = time.Hour
	failing := setup(t, cfg)
	healthy := setup(t, cfg)
	failing.trip(t)

	assert.False(t, failing.g.Claimable())
	assert.True(t, healthy.g.Claimable())
	assert.Equal(t, guard.Closed, healthy.g.State())
	for range 10 {
		deliver(t, healthy.g, true, true)
	}
	healthy.expectNone(t)
}

func TestBulkhead(t *testing.T) {
	t.Parallel()
	const slots, workers = 3, 10
	b := setup(t, guard.Config{Concurrency: slots})
	var inFlight, most, total atomic.Int32
	acquired := make(chan struct{}, workers)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			done, err := b.g.Acquire(context.Background())
			if !assert.NoError(t, err) {
				return
			}
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			total.Add(1)
			acquired <- struct{}{}
			<-release
			inFlight.Add(-1)
			done(true, true)
		})
	}
	for range slots {
		testwait.For(t, signalTimeout, "every slot of the bulkhead taken", acquired)
	}
	close(release)
	wg.Wait()
	assert.Equal(t, int32(slots), most.Load(), "most deliveries in flight at once")
	assert.Equal(t, int32(workers), total.Load())
}

func TestBulkheadWaitHonoursContext(t *testing.T) {
	t.Parallel()
	b := setup(t, guard.Config{Concurrency: 1})
	held, err := b.g.Acquire(context.Background())
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() {
		_, err := b.g.Acquire(ctx)
		errs <- err
	}()
	cancel()
	require.ErrorIs(t, testwait.For(t, signalTimeout, "Acquire to give up once its context ended", errs), context.Canceled)

	// The cancelled wait took nothing: once released, the slot is free.
	held(true, true)
	deliver(t, b.g, true, true)
}

func TestReleaseTwiceFreesOneSlot(t *testing.T) {
	t.Parallel()
	b := setup(t, guard.Config{Concurrency: 1})
	first, err := b.g.Acquire(context.Background())
	require.NoError(t, err)
	first(true, true)
	second, err := b.g.Acquire(context.Background())
	require.NoError(t, err)
	first(true, true) // must not free second's slot

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = b.g.Acquire(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the only slot is still second's")
	second(true, true)
}

func TestRate(t *testing.T) {
	t.Parallel()
	b := setup(t, guard.Config{Rate: 50, Burst: 1})
	start := time.Now()
	for range 20 {
		deliver(t, b.g, true, true)
	}
	// One token at once, then one every 20 ms: 19 waits. A lower bound
	// only, so a slow machine cannot fail it.
	assert.GreaterOrEqual(t, time.Since(start), 375*time.Millisecond)
}

func TestRateWaitHonoursContext(t *testing.T) {
	t.Parallel()
	b := setup(t, guard.Config{Rate: 0.001, Burst: 1, Concurrency: 1})
	deliver(t, b.g, true, true) // takes the only token for 1,000 s
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The limiter sees at once that the token comes after the deadline.
	_, err := b.g.Acquire(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rate token")
	// The refused delivery freed its slot and was not counted.
	assert.Equal(t, guard.Closed, b.g.State())
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	_, err = b.g.Acquire(ctx2)
	require.ErrorIs(t, err, context.Canceled)
}

func TestAcquireCancelledContext(t *testing.T) {
	t.Parallel()
	b := setup(t, guard.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.g.Acquire(ctx)
	require.ErrorIs(t, err, context.Canceled)
}
