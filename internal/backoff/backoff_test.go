package backoff_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/internal/backoff"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// seeded returns a deterministic source of uniform values in [0, 1).
func seeded(seed uint64) func() float64 {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)).Float64
}

func TestWithDefaults(t *testing.T) {
	t.Parallel()
	want := backoff.Policy{Base: time.Second, Cap: 10 * time.Minute, MaxAttempts: 12}
	assert.Equal(t, want, backoff.Policy{}.WithDefaults())
	assert.Equal(t, want, backoff.Policy{Base: -1, Cap: -1, MaxAttempts: -3}.WithDefaults())
	custom := backoff.Policy{Base: 5 * time.Millisecond, Cap: time.Second, MaxAttempts: 3}
	assert.Equal(t, custom, custom.WithDefaults(), "set fields are kept")
	assert.Equal(t, backoff.Policy{Base: 2 * time.Second, Cap: 10 * time.Minute, MaxAttempts: 12},
		backoff.Policy{Base: 2 * time.Second}.WithDefaults(), "only zero fields take defaults")
}

func TestCeiling(t *testing.T) {
	t.Parallel()
	const maxDur = time.Duration(math.MaxInt64)
	def := backoff.Policy{}
	small := backoff.Policy{Base: 100 * time.Millisecond, Cap: time.Second}
	huge := backoff.Policy{Base: time.Hour, Cap: maxDur}
	tests := []struct {
		name    string
		p       backoff.Policy
		attempt int
		want    time.Duration
	}{
		{"defaults first", def, 1, time.Second},
		{"defaults second", def, 2, 2 * time.Second},
		{"defaults tenth", def, 10, 512 * time.Second},
		{"defaults capped", def, 11, 10 * time.Minute},
		{"defaults far", def, 200, 10 * time.Minute},
		{"attempt zero counts as one", def, 0, time.Second},
		{"negative attempt counts as one", def, -5, time.Second},
		{"small 1", small, 1, 100 * time.Millisecond},
		{"small 4", small, 4, 800 * time.Millisecond},
		{"small 5 capped", small, 5, time.Second},
		{"cap below base", backoff.Policy{Base: time.Minute, Cap: time.Second}, 1, time.Second},
		{"huge 20", huge, 20, time.Hour << 19},
		{"huge 200 no overflow", huge, 200, maxDur},
		{"huge MaxInt no overflow", huge, math.MaxInt, maxDur},
		{"nanosecond base 63", backoff.Policy{Base: 1, Cap: maxDur}, 63, 1 << 62},
		{"nanosecond base 64 would overflow", backoff.Policy{Base: 1, Cap: maxDur}, 64, maxDur},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, tt.p.Ceiling(tt.attempt))
		})
	}
}

func TestDelayWithinBounds(t *testing.T) {
	t.Parallel()
	policies := []backoff.Policy{
		{},
		{Base: 100 * time.Millisecond, Cap: 30 * time.Second},
		{Base: time.Hour, Cap: time.Duration(math.MaxInt64)},
		{Base: 1, Cap: 7},
	}
	rnd := seeded(1)
	for _, p := range policies {
		d := p.WithDefaults()
		for attempt := 1; attempt <= 70; attempt++ {
			// Recomputed here, in floating point, independently of Ceiling.
			want := math.Min(float64(d.Cap), float64(d.Base)*math.Pow(2, float64(attempt-1)))
			for range 200 {
				got := p.Delay(attempt, rnd)
				require.GreaterOrEqual(t, got, time.Duration(0), "policy %+v attempt %d", p, attempt)
				require.LessOrEqual(t, float64(got), want, "policy %+v attempt %d", p, attempt)
			}
		}
	}
}

func TestDelayNoOverflowAtLargeAttempts(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{Base: time.Hour, Cap: time.Duration(math.MaxInt64)}
	almostOne := func() float64 { return math.Nextafter(1, 0) }
	for _, attempt := range []int{63, 64, 100, 200, math.MaxInt} {
		// Above 2^53 ns a float64 cannot name every nanosecond: the top
		// draw lands within a few microseconds of the ceiling.
		got := p.Delay(attempt, almostOne)
		assert.LessOrEqual(t, got, time.Duration(math.MaxInt64), "attempt %d", attempt)
		assert.Greater(t, got, time.Duration(math.MaxInt64)-time.Millisecond, "attempt %d", attempt)
		assert.GreaterOrEqual(t, p.Delay(attempt, nil), time.Duration(0), "attempt %d", attempt)
	}
	def := backoff.Policy{}
	assert.LessOrEqual(t, def.Delay(200, nil), 10*time.Minute)
}

func TestDelayEnds(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{Base: time.Second, Cap: time.Minute}
	almostOne := math.Nextafter(1, 0)
	tests := []struct {
		name string
		r    float64
		want time.Duration
	}{
		{"zero draws zero", 0, 0},
		{"just below one draws the ceiling", almostOne, 4 * time.Second},
		{"half draws the middle", 0.5, 2 * time.Second},
		{"one is clamped", 1, 4 * time.Second},
		{"above one is clamped", 7, 4 * time.Second},
		{"negative is clamped", -3, 0},
		{"NaN is clamped", math.NaN(), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, p.Delay(3, func() float64 { return tt.r }))
		})
	}
}

// TestDelaySpread draws 10,000 delays and checks they are uniform over
// [0, ceiling]: a chi-square test over 20 equal buckets, and the extremes
// near both ends. A constant, or a delay stuck near one end, fails all of
// these.
func TestDelaySpread(t *testing.T) {
	t.Parallel()
	const draws, buckets = 10_000, 20
	p := backoff.Policy{Base: time.Second, Cap: 10 * time.Minute}
	for _, attempt := range []int{1, 4, 12} {
		bound := p.Ceiling(attempt)
		rnd := seeded(uint64(attempt))
		var counts [buckets]int
		lo, hi := bound, time.Duration(0)
		for range draws {
			d := p.Delay(attempt, rnd)
			lo, hi = min(lo, d), max(hi, d)
			counts[min(int(float64(d)/float64(bound)*buckets), buckets-1)]++
		}
		expected := float64(draws) / buckets
		chi2 := 0.0
		for _, c := range counts {
			chi2 += (float64(c) - expected) * (float64(c) - expected) / expected
		}
		// 19 degrees of freedom: the 0.999 quantile is 43.82. A constant
		// scores (draws-expected)²/expected + 19·expected = 190,000.
		assert.Less(t, chi2, 43.82, "attempt %d: counts %v", attempt, counts)
		assert.Less(t, float64(lo), 0.01*float64(bound), "attempt %d: smallest delay", attempt)
		assert.Greater(t, float64(hi), 0.99*float64(bound), "attempt %d: largest delay", attempt)
	}
}

func TestDelayDefaultSourceSpreads(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{}
	seen := map[time.Duration]bool{}
	for range 100 {
		seen[p.Delay(5, nil)] = true
	}
	// 100 draws from 16e9+1 values: a repeat is all but impossible.
	assert.Greater(t, len(seen), 90)
}

func TestExhausted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p        backoff.Policy
		attempts int
		want     bool
	}{
		{backoff.Policy{}, 0, false},
		{backoff.Policy{}, 11, false},
		{backoff.Policy{}, 12, true},
		{backoff.Policy{}, 13, true},
		{backoff.Policy{MaxAttempts: 1}, 0, false},
		{backoff.Policy{MaxAttempts: 1}, 1, true},
		{backoff.Policy{MaxAttempts: 3}, 2, false},
		{backoff.Policy{MaxAttempts: 3}, 3, true},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.p.Exhausted(tt.attempts), "%+v after %d attempts", tt.p, tt.attempts)
	}
}
