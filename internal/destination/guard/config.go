package guard

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults for the zero fields of a Config.
const (
	DefaultConcurrency  = 16
	DefaultFailureRatio = 0.5
	DefaultMinRequests  = 10
	DefaultWindow       = 30 * time.Second
	DefaultOpenTimeout  = 30 * time.Second
)

// windowBuckets is how many buckets the breaker's window rolls in: an
// outcome leaves the window between Window·(1-1/windowBuckets) and Window
// after it was recorded.
const windowBuckets = 10

// ErrConfig is wrapped by New's error for a Config it cannot use.
var ErrConfig = errors.New("guard: invalid config")

// Config is one destination's resilience settings. The zero value is
// usable: every zero field takes its default (see WithDefaults).
type Config struct {
	// Concurrency is the bulkhead: the most deliveries to this destination
	// in flight at once (DefaultConcurrency).
	Concurrency int
	// Rate is the token bucket's refill, in deliveries started per second;
	// 0 means unlimited.
	Rate float64
	// Burst is the token bucket's size: how many deliveries may start at
	// once after a quiet spell. Ignored when Rate is 0; when Rate is set
	// and Burst is 0, Burst is 1, so the rate is never exceeded over any
	// span longer than 1/Rate.
	Burst int
	// Breaker configures the circuit breaker.
	Breaker BreakerConfig
}

// BreakerConfig configures a destination's circuit breaker. The breaker
// opens when, over the last Window, at least MinRequests deliveries had a
// counted outcome and at least FailureRatio of them failed, counting the
// other dispatchers' outcomes given by SetPeers with its own; it decides
// when one of its own deliveries fails. For one Window after it closed,
// its sample starts small, so it then opens only when the failure ratio is
// above FailureRatio at 99 % confidence (see readyToTrip). After
// OpenTimeout it lets exactly one probe through (half-open): a success
// closes it, a failure opens it again.
type BreakerConfig struct {
	// FailureRatio in (0, 1] (DefaultFailureRatio).
	FailureRatio float64
	// MinRequests is the fewest counted outcomes in the window before the
	// breaker may open (DefaultMinRequests).
	MinRequests int
	// Window is the sliding window of outcomes (DefaultWindow). It rolls
	// in tenths: an outcome counts for between 0.9 and 1 Window.
	Window time.Duration
	// OpenTimeout is how long the breaker stays open before it admits a
	// probe (DefaultOpenTimeout).
	OpenTimeout time.Duration
}

// WithDefaults returns c with every zero field replaced by its default.
// Rate 0 stays 0 (unlimited).
func (c Config) WithDefaults() Config {
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Rate > 0 && c.Burst == 0 {
		c.Burst = 1
	}
	b := &c.Breaker
	if b.FailureRatio == 0 {
		b.FailureRatio = DefaultFailureRatio
	}
	if b.MinRequests == 0 {
		b.MinRequests = DefaultMinRequests
	}
	if b.Window == 0 {
		b.Window = DefaultWindow
	}
	if b.OpenTimeout == 0 {
		b.OpenTimeout = DefaultOpenTimeout
	}
	return c
}

// Validate reports the first setting of c that is out of range, wrapping
// ErrConfig. It expects defaults to be applied already.
func (c Config) Validate() error {
	b := c.Breaker
	switch {
	case c.Concurrency < 1:
		return fmt.Errorf("%w: concurrency %d below 1", ErrConfig, c.Concurrency)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("%w: rate %v is not a finite number >= 0", ErrConfig, c.Rate)
	case c.Rate > 0 && c.Burst < 1:
		return fmt.Errorf("%w: burst %d below 1", ErrConfig, c.Burst)
	case !(b.FailureRatio > 0 && b.FailureRatio <= 1):
		return fmt.Errorf("%w: failure ratio %v outside (0, 1]", ErrConfig, b.FailureRatio)
	case b.MinRequests < 1:
		return fmt.Errorf("%w: min requests %d below 1", ErrConfig, b.MinRequests)
	case b.Window <= 0:
		return fmt.Errorf("%w: window %v not positive", ErrConfig, b.Window)
	case b.OpenTimeout <= 0:
		return fmt.Errorf("%w: open timeout %v not positive", ErrConfig, b.OpenTimeout)
	}
	return nil
}
