package guard_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination/guard"
	"github.com/switchyard/switchyard/internal/testwait"
)

// recovered returns a Guard with the default 50 % / 10-request breaker
// that has just been through an outage: opened by ten failures, then
// closed by a successful probe. Its open spell lasts 1 ms.
func recovered(t *testing.T) *guard.Guard {
	t.Helper()
	g, err := guard.New("d", guard.Config{Breaker: guard.BreakerConfig{OpenTimeout: time.Millisecond}}, nil)
	require.NoError(t, err)
	for range 10 {
		record(t, g, false, true)
	}
	require.NotEqual(t, guard.Closed, g.State(), "the outage opens it (open, or half-open already)")
	testwait.Until(t, signalTimeout, "half-open", func() bool { return g.State() == guard.HalfOpen })
	record(t, g, true, true)
	require.Equal(t, guard.Closed, g.State(), "the probe's success closes it")
	return g
}

// opens delivers outcomes to g (true: failed) and reports whether the
// breaker refused one or is no longer closed at the end (open, or already
// half-open: a loaded machine can take longer than the 1 ms open timeout
// between the last outcome and the check).
func opens(g *guard.Guard, outcomes []bool) bool {
	for _, failed := range outcomes {
		release, err := g.Acquire(context.Background())
		if errors.Is(err, guard.ErrOpen) {
			return true
		}
		release(!failed, true)
	}
	return g.State() != guard.Closed
}

// A share that was asked before the breaker closed answers with the
// peers' outcomes of a window reaching into the outage: mostly failures.
// Those counts must not reach the closed breaker, or its first failure
// after the outage opens it again (a breaker flapping after recovery).
func TestPeersAskedBeforeACloseAreDropped(t *testing.T) {
	t.Parallel()
	g, err := guard.New("d", guard.Config{Breaker: guard.BreakerConfig{OpenTimeout: time.Millisecond}}, nil)
	require.NoError(t, err)
	for range 10 {
		record(t, g, false, true)
	}
	testwait.Until(t, signalTimeout, "half-open", func() bool { return g.State() == guard.HalfOpen })
	assert.Equal(t, g.Config().Breaker.Window, g.Lookback(), "a share begins: the whole window")
	record(t, g, true, true) // the probe succeeds while the share is out
	require.Equal(t, guard.Closed, g.State())
	g.SetPeers(5, 95) // its answer: the peers' failures of the outage
	record(t, g, false, true)
	assert.Equal(t, guard.Closed, g.State(), "one failure after closing, with the outage's counts dropped")

	// The next share asks over the time since the close, and counts.
	assert.Less(t, g.Lookback(), g.Config().Breaker.Window)
	g.SetPeers(0, 20)
	record(t, g, false, true)
	assert.Equal(t, guard.Open, g.State(), "counts asked after the close do count")
}

// A destination that fails 30 % of the time never reopens a 50 % breaker
// that closed after an outage, over 200 recoveries: the fresh window's
// small samples would (counted: the same outcome sequences open a breaker
// that trips on the bare ratio in more than one recovery in ten).
func TestThirtyPercentNeverReopensABreakerAfterAnOutage(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(16, 4))
	bare := 0
	for recovery := range 200 {
		outcomes := make([]bool, 100)
		for i := range outcomes {
			outcomes[i] = rnd.Float64() < 0.3
		}
		if bareRatioTrips(outcomes) {
			bare++
		}
		require.False(t, opens(recovered(t), outcomes), "recovery %d: 30 %% errors reopened the breaker", recovery)
	}
	t.Logf("the bare ratio would have reopened the breaker in %d of 200 recoveries", bare)
	assert.Greater(t, bare, 20, "the sequences test the fresh window")
}

// bareRatioTrips reports whether a 50 % / 10-request breaker starting
// empty and deciding on the bare ratio opens on these outcomes.
func bareRatioTrips(failed []bool) bool {
	failures := 0
	for i, f := range failed {
		if f {
			failures++
			if i+1 >= 10 && 2*failures >= i+1 {
				return true
			}
		}
	}
	return false
}

// A real outage right after a recovery opens the breaker again within
// MinRequests outcomes, and a breaker whose close is a Window old decides
// on the bare ratio again.
func TestOutageAfterARecoveryOpensAgain(t *testing.T) {
	t.Parallel()
	g := recovered(t)
	assert.True(t, opens(g, []bool{true, true, true, true, true, true, true, true, true, true}), "ten failures of ten")

	h, err := guard.New("d", guard.Config{Breaker: guard.BreakerConfig{OpenTimeout: time.Millisecond, Window: 100 * time.Millisecond}}, nil)
	require.NoError(t, err)
	for range 10 {
		record(t, h, false, true)
	}
	testwait.Until(t, signalTimeout, "half-open", func() bool { return h.State() == guard.HalfOpen })
	record(t, h, true, true)
	// The point is the time passing: a timer, not a wait for a signal.
	<-time.After(150 * time.Millisecond)
	assert.True(t, opens(h, []bool{false, false, false, false, false, true, true, true, true, true}), "5 of 10 after probation")
}
