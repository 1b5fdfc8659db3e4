package guard_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination/guard"
)

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	g, err := guard.New("d", guard.Config{}, nil)
	require.NoError(t, err)
	assert.Equal(t, guard.Config{
		Concurrency: 16,
		Breaker: guard.BreakerConfig{
			FailureRatio: 0.5, MinRequests: 10, Window: 30 * time.Second, OpenTimeout: 30 * time.Second,
		},
	}, g.Config())
	assert.Equal(t, "d", g.Name())

	withRate := guard.Config{Rate: 5}.WithDefaults()
	assert.Equal(t, 1, withRate.Burst, "a rate without a burst gets burst 1")
	kept := guard.Config{Concurrency: 2, Rate: 5, Burst: 3}.WithDefaults()
	assert.Equal(t, 2, kept.Concurrency)
	assert.Equal(t, 3, kept.Burst)
}

func TestConfigInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  guard.Config
	}{
		{"negative concurrency", guard.Config{Concurrency: -1}},
		{"negative rate", guard.Config{Rate: -1}},
		{"NaN rate", guard.Config{Rate: math.NaN()}},
		{"infinite rate", guard.Config{Rate: math.Inf(1)}},
		{"negative burst", guard.Config{Rate: 1, Burst: -1}},
		{"ratio above one", guard.Config{Breaker: guard.BreakerConfig{FailureRatio: 1.5}}},
		{"negative ratio", guard.Config{Breaker: guard.BreakerConfig{FailureRatio: -0.1}}},
		{"NaN ratio", guard.Config{Breaker: guard.BreakerConfig{FailureRatio: math.NaN()}}},
		{"negative min requests", guard.Config{Breaker: guard.BreakerConfig{MinRequests: -1}}},
		{"negative window", guard.Config{Breaker: guard.BreakerConfig{Window: -time.Second}}},
		{"negative open timeout", guard.Config{Breaker: guard.BreakerConfig{OpenTimeout: -time.Second}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, err := guard.New("bad", tt.cfg, nil)
			require.ErrorIs(t, err, guard.ErrConfig)
			assert.Nil(t, g)
			assert.Contains(t, err.Error(), `"bad"`)
		})
	}
}
