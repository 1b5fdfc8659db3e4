// Package backoff computes retry delays: exponential backoff with full
// jitter and a cap, and the attempt budget after which a message is dead.
//
// Full jitter (a delay drawn uniformly from [0, ceiling]) spreads the
// retries of many messages that failed together, so a destination that
// recovers is not hit by all of them at once.
package backoff

import (
	"math"
	"math/rand/v2"
	"time"
)

// Defaults for the zero fields of a Policy.
const (
	DefaultBase        = time.Second
	DefaultCap         = 10 * time.Minute
	DefaultMaxAttempts = 12
)

// Policy is a retry policy. The zero value is usable: every field that is
// zero or negative takes its default (see WithDefaults). A Policy is a
// value; its methods are safe for concurrent use.
type Policy struct {
	// Base is the ceiling of the first retry's delay (DefaultBase).
	Base time.Duration
	// Cap bounds every delay (DefaultCap). A Cap below Base bounds even
	// the first delay.
	Cap time.Duration
	// MaxAttempts is the number of attempts a message gets in all,
	// the first included (DefaultMaxAttempts).
	MaxAttempts int
}

// WithDefaults returns p with each field that is zero or negative replaced
// by its default.
func (p Policy) WithDefaults() Policy {
	if p.Base <= 0 {
		p.Base = DefaultBase
	}
	if p.Cap <= 0 {
		p.Cap = DefaultCap
	}
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	return p
}

// Ceiling returns the largest delay Delay can return after the given
// attempt: min(Cap, Base·2^(attempt-1)), computed without overflow for any
// attempt. Attempt 1 is the first attempt (so the delay before the second);
// an attempt below 1 counts as 1. Defaults apply to zero fields.
func (p Policy) Ceiling(attempt int) time.Duration {
	p = p.WithDefaults()
	bound := p.Base
	// The loop ends after at most 63 doublings: bound grows until it
	// passes Cap/2, and doubling is only done below that, so it cannot
	// overflow.
	for i := 1; i < attempt; i++ {
		if bound > p.Cap/2 {
			return p.Cap
		}
		bound *= 2
	}
	return min(bound, p.Cap)
}

// Delay returns how long to wait before retrying after the given failed
// attempt: a value drawn uniformly from [0, Ceiling(attempt)], both ends
// included (to the nanosecond for ceilings below 2^53 ns, about 104 days;
// above that, to float64 resolution), using rnd as the source of uniform values in [0, 1). A nil rnd
// uses math/rand/v2's Float64, which is safe for concurrent use; tests pass
// their own for determinism. Values of rnd outside [0, 1) (or NaN) are
// clamped into it, so a faulty source cannot produce a delay out of bounds.
func (p Policy) Delay(attempt int, rnd func() float64) time.Duration {
	if rnd == nil {
		rnd = rand.Float64
	}
	bound := p.Ceiling(attempt)
	r := rnd()
	switch {
	case math.IsNaN(r) || r < 0:
		r = 0
	case r >= 1:
		r = math.Nextafter(1, 0)
	}
	// bound+1 slots so that bound itself can be drawn; computed in
	// floating point because bound+1 overflows when Cap is the largest
	// Duration, and clamped because the product can round up past bound.
	d := r * (float64(bound) + 1)
	if d >= float64(bound) {
		return bound
	}
	return time.Duration(d)
}

// Exhausted reports whether a message that has had the given number of
// attempts has used its budget and must go to dead instead of being
// retried. Defaults apply to zero fields.
func (p Policy) Exhausted(attempts int) bool {
	return attempts >= p.WithDefaults().MaxAttempts
}
