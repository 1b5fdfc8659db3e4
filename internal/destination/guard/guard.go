// Package guard keeps one destination from hurting the others: a circuit
// breaker (closed, open, half-open), a bulkhead (the most deliveries in
// flight) and a token bucket (the rate deliveries start at), one Guard per
// destination.
//
// The dispatcher asks Claimable before it claims a destination's messages,
// so that while the breaker is open those messages stay queued and burn no
// attempts, and wraps every delivery in Acquire and the release it returns.
// The breaker is github.com/sony/gobreaker/v2 over a sliding window of
// outcomes; the token bucket is golang.org/x/time/rate.
//
// A destination's breaker decides on the outcomes of every dispatcher, not
// only its own: TakeOutcomes hands this process's outcomes to whoever shares
// them (internal/destination/registry, through PostgreSQL) and SetPeers
// gives the breaker the other processes' outcomes of its window (see
// share.go).
package guard

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"
)

// ErrOpen is returned (wrapped) by Acquire when the breaker refuses a
// delivery: it is open, or half-open with its one probe already out. The
// delivery was not attempted and must not count as an attempt.
var ErrOpen = errors.New("guard: circuit breaker open")

// Outcomes as the breaker sees them; see the release func of Acquire.
var (
	errFailed   = errors.New("guard: delivery failed")
	errExcluded = errors.New("guard: outcome not counted")
)

// State is a breaker's state. Its values suit a gauge: 0 closed,
// 1 half-open, 2 open.
type State int

// The breaker's states.
const (
	// Closed: deliveries flow; outcomes are counted.
	Closed State = iota
	// HalfOpen: one probe delivery is let through to test the destination.
	HalfOpen
	// Open: no deliveries until OpenTimeout has passed.
	Open
)

// String returns "closed", "half-open" or "open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case HalfOpen:
		return "half-open"
	case Open:
		return "open"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

func fromBreaker(s gobreaker.State) State {
	switch s {
	case gobreaker.StateOpen:
		return Open
	case gobreaker.StateHalfOpen:
		return HalfOpen
	}
	return Closed
}

// Guard is one destination's breaker, bulkhead and token bucket. It is safe
// for concurrent use. A Guard needs no closing: its only background work is
// a timer, armed while the breaker is open, that reports the move to
// half-open when OpenTimeout has passed even if nothing calls the Guard.
type Guard struct {
	name    string
	cfg     Config
	slots   chan struct{} // bulkhead: holds one value per delivery in flight
	limiter *rate.Limiter // nil when the rate is unlimited
	breaker *gobreaker.TwoStepCircuitBreaker[struct{}]
	events  notifier

	shared shared // outcomes for, and from, the other dispatchers

	wakeMu    sync.Mutex
	wake      *time.Timer // guarded by wakeMu; nil until the breaker first opens
	openUntil time.Time   // guarded by wakeMu; when the current open spell ends
}

// New returns the Guard of the destination called name, with cfg's zero
// fields set to their defaults, or an error wrapping ErrConfig. The breaker
// starts closed. onStateChange, if not nil, is called after every change of
// the breaker's state, in the order the changes happened, never twice at
// once and never while the Guard holds a lock, so it may call the Guard. It
// runs on the goroutine of whichever Guard call made the change (or the
// wake timer's) and delays that call, so it should be quick; it must not
// panic.
func New(name string, cfg Config, onStateChange func(name string, from, to State)) (*Guard, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("guard %q: %w", name, err)
	}
	g := &Guard{
		name:   name,
		cfg:    cfg,
		slots:  make(chan struct{}, cfg.Concurrency),
		events: notifier{name: name, fn: onStateChange},
	}
	if cfg.Rate > 0 {
		g.limiter = rate.NewLimiter(rate.Limit(cfg.Rate), cfg.Burst)
	}
	g.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](g.breakerSettings())
	return g, nil
}

func (g *Guard) breakerSettings() gobreaker.Settings {
	b := g.cfg.Breaker
	return gobreaker.Settings{
		Name:         g.name,
		MaxRequests:  1, // one probe in half-open
		Interval:     b.Window,
		BucketPeriod: b.Window / windowBuckets,
		Timeout:      b.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			// Its own outcomes of the window plus the other processes'.
			successes, failures, closedAt := g.shared.peers()
			failures += uint64(c.TotalFailures)
			return g.readyToTrip(failures, successes+failures+uint64(c.TotalSuccesses), closedAt)
		},
		IsExcluded: func(err error) bool { return errors.Is(err, errExcluded) },
		// Runs under the breaker's lock: only queue the change.
		OnStateChange: func(_ string, from, to gobreaker.State) {
			switch to {
			case gobreaker.StateOpen:
				g.armWake()
			case gobreaker.StateClosed:
				g.shared.closed()
			}
			g.events.push(fromBreaker(from), fromBreaker(to))
		},
	}
}

// Name returns the destination's name, as given to New.
func (g *Guard) Name() string { return g.name }

// Config returns the Guard's settings, defaults applied.
func (g *Guard) Config() Config { return g.cfg }

// State returns the breaker's state now. Reading it moves an open breaker
// whose OpenTimeout has passed to half-open.
func (g *Guard) State() State {
	s := fromBreaker(g.breaker.State())
	g.events.flush()
	return s
}

// Claimable reports whether the dispatcher should claim this destination's
// messages now: true when the breaker is closed, false when it is open, and
// in half-open true only while no probe is in flight. It is advice, read
// without holding anything: Acquire decides, and may still return ErrOpen.
func (g *Guard) Claimable() bool {
	switch g.State() {
	case Open:
		return false
	case HalfOpen:
		c := g.breaker.Counts()
		return c.Requests <= c.TotalExclusions
	}
	return true
}
