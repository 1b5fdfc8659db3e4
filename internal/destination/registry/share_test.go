package registry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/destination/guard"
	"github.com/switchyard/switchyard/internal/testwait"
)

// breakerRow inserts a webhook destination with a 50 % / 10-request
// breaker (the defaults) that opens for a long time once tripped.
func breakerRow(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `INSERT INTO switchyard.destinations
		(name, kind, address, breaker_failure_ratio, breaker_min_requests, breaker_open_ms)
		VALUES ('flaky', 'webhook', 'http://127.0.0.1:9', 0.5, 10, 600000)`)
	require.NoError(t, err)
}

// history records outcomes of an earlier process in the shared window, as a
// dispatcher that ran before this test's processes would have.
func history(t *testing.T, pool *pgxpool.Pool, successes, failures int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `INSERT INTO switchyard.breaker_outcomes
		(destination, owner, bucket, successes, failures) VALUES ('flaky', 'earlier', date_trunc('second', now()), $1, $2)`,
		successes, failures)
	require.NoError(t, err)
}

// process is one dispatcher's registry and the flaky destination's guard.
func process(t *testing.T, pool *pgxpool.Pool, owner string) (*Registry, *guard.Guard) {
	t.Helper()
	r := New(pool, Config{Owner: owner})
	routes, _, err := r.Sync(context.Background())
	require.NoError(t, err)
	require.NoError(t, r.Share(context.Background()), "a started process reads the shared window at once")
	return r, routes["flaky"].Guard
}

// deliver records n outcomes in g, each failing when fail() says so, and
// reports whether the breaker refused one or is no longer closed (it
// opened: with a 1 ms open spell it may be half-open by the time it is
// asked, on a loaded machine).
func deliver(t *testing.T, g *guard.Guard, n int, fail func() bool) (opened bool) {
	t.Helper()
	for range n {
		release, err := g.Acquire(context.Background())
		if err != nil {
			require.ErrorIs(t, err, guard.ErrOpen)
			return true
		}
		release(!fail(), true)
	}
	return g.State() != guard.Closed
}

// blindTrips reports whether a breaker deciding on these outcomes alone
// (a 50 % / 10-request window starting empty) would have opened.
func blindTrips(outcomes []bool) bool {
	failures := 0
	for i, failed := range outcomes {
		if failed {
			failures++
		}
		if i+1 >= 10 && 2*failures >= i+1 {
			return true
		}
	}
	return false
}

// At 30 % errors a 50 % breaker never opens, on any of three dispatchers,
// across forty restarts of one of them: each restarted process reads the
// shared window before it decides, where deciding on its own first
// outcomes would open it often (counted: the same outcome sequences trip
// a blind breaker several times).
func TestSharedBreakerNeverOpensAtThirtyPercentAcrossRestarts(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	breakerRow(t, pool)
	history(t, pool, 70, 30)
	rnd := rand.New(rand.NewPCG(16, 30))
	var blind int
	fail := func(seen *[]bool) func() bool {
		return func() bool {
			f := rnd.Float64() < 0.3
			*seen = append(*seen, f)
			return f
		}
	}
	regA, a := process(t, pool, "steady-a")
	regB, b := process(t, pool, "steady-b")
	for restart := range 40 {
		regC, c := process(t, pool, fmt.Sprintf("restarted-%d", restart))
		var seen []bool
		for range 4 {
			for _, g := range []*guard.Guard{a, b, c} {
				var ignored []bool
				f := fail(&ignored)
				if g == c {
					f = fail(&seen)
				}
				require.False(t, deliver(t, g, 5, f), "restart %d: a breaker opened at 30 %% errors", restart)
			}
			for _, r := range []*Registry{regA, regB, regC} {
				require.NoError(t, r.Share(context.Background()))
			}
		}
		if blindTrips(seen) {
			blind++
		}
	}
	assert.Positive(t, blind, "the outcome sequences would have tripped a breaker deciding alone")
	t.Logf("a blind breaker would have opened on %d of 40 restarts", blind)
}

// An outage opens the breaker of every dispatcher within its window, even
// of one that saw a single failure itself: the others' failures count.
func TestSharedBreakerOpensEverywhereInAnOutage(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	breakerRow(t, pool)
	history(t, pool, 70, 30)
	always := func() bool { return true }
	regA, a := process(t, pool, "busy-a")
	regB, b := process(t, pool, "busy-b")
	regC, c := process(t, pool, "quiet-c")
	for round := 0; a.State() != guard.Open || b.State() != guard.Open; round++ {
		require.Less(t, round, 20, "the busy dispatchers never opened")
		deliver(t, a, 5, always)
		deliver(t, b, 5, always)
		require.NoError(t, regA.Share(context.Background()))
		require.NoError(t, regB.Share(context.Background()))
	}
	require.NoError(t, regC.Share(context.Background()))
	assert.Equal(t, guard.Closed, c.State(), "no failure of its own yet")
	assert.True(t, deliver(t, c, 1, always), "one failure of its own opens the quiet dispatcher's breaker")
}

// A breaker that closes after an outage forgets the outage: the others'
// failures from before it closed do not trip it again at once.
func TestSharedBreakerClosedStartsAfresh(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	_, err := pool.Exec(context.Background(), `INSERT INTO switchyard.destinations
		(name, kind, address, breaker_failure_ratio, breaker_min_requests, breaker_open_ms)
		VALUES ('flaky', 'webhook', 'http://127.0.0.1:9', 0.5, 10, 1)`)
	require.NoError(t, err)
	history(t, pool, 0, 100)
	reg, g := process(t, pool, "recovering")
	require.True(t, deliver(t, g, 1, func() bool { return true }), "the outage opens it")
	// Open for 1 ms, then one probe: its success closes the breaker.
	testwait.Until(t, 5e9, "half-open", func() bool { return g.State() == guard.HalfOpen })
	require.False(t, deliver(t, g, 1, func() bool { return false }))
	require.Equal(t, guard.Closed, g.State())
	require.NoError(t, reg.Share(context.Background()))
	assert.False(t, deliver(t, g, 3, func() bool { return true }), "three failures after closing are below 10 requests")
}
