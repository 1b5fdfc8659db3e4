package guard_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination/guard"
)

// record releases one delivery with the given outcome.
func record(t *testing.T, g *guard.Guard, success, counted bool) {
	t.Helper()
	release, err := g.Acquire(context.Background())
	require.NoError(t, err)
	release(success, counted)
}

// Counted outcomes are handed out once by TakeOutcomes, uncounted ones
// never; ReturnOutcomes gives them back for the next take. A breaker with
// peers that saw many successes does not open on its own first failures;
// with peers that saw many failures its first own failure opens it.
func TestSharedOutcomes(t *testing.T) {
	t.Parallel()
	g, err := guard.New("d", guard.Config{}, nil)
	require.NoError(t, err)
	record(t, g, true, true)
	record(t, g, false, true)
	record(t, g, false, false)
	s, f := g.TakeOutcomes()
	assert.Equal(t, [2]uint64{1, 1}, [2]uint64{s, f})
	s, f = g.TakeOutcomes()
	assert.Equal(t, [2]uint64{0, 0}, [2]uint64{s, f}, "taken once")
	g.ReturnOutcomes(3, 4)
	s, f = g.TakeOutcomes()
	assert.Equal(t, [2]uint64{3, 4}, [2]uint64{s, f})
	assert.Equal(t, g.Config().Breaker.Window, g.Lookback(), "never closed after an open spell: the whole window")

	g.SetPeers(1000, 0)
	for range 10 {
		record(t, g, false, true)
	}
	assert.Equal(t, guard.Closed, g.State(), "10 failures against 1000 peer successes")

	h, err := guard.New("e", guard.Config{}, nil)
	require.NoError(t, err)
	h.SetPeers(0, 20)
	record(t, h, false, true)
	assert.Equal(t, guard.Open, h.State(), "one own failure with 20 peer failures")
}
