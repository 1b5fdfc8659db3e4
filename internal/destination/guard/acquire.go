package guard

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Acquire admits one delivery. It returns ErrOpen (wrapped) at once if the
// breaker is open; otherwise it waits for a bulkhead slot, asks the breaker
// (ErrOpen if it refuses: half-open with the probe already out), then waits
// for a token from the bucket. Waiting ends with ctx's error (wrapped) if ctx
// ends first. A refused or failed Acquire holds nothing.
//
// On success the caller delivers, then calls release exactly once; later
// calls do nothing. release records the outcome in the breaker and frees
// the slot:
//
//   - success=true, counted=true: the destination accepted the message.
//   - success=false, counted=true: the destination is unhealthy or
//     unreachable: a 5xx, 408, 429, a timeout of the delivery itself, a
//     refused connection, a failed DNS lookup.
//   - counted=false (success ignored): the outcome says nothing about the
//     destination's health, so the breaker ignores it: the delivery's ctx
//     was cancelled by our own shutdown or lease loss, or the message itself
//     was at fault (a 4xx other than 408/429, an invalid payload). In
//     half-open, an uncounted probe lets the next probe through.
//
// An outcome that arrives after the breaker changed state (a delivery
// admitted while closed that ends after the breaker opened) is ignored.
func (g *Guard) Acquire(ctx context.Context) (release func(success, counted bool), err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("guard %q: acquire: %w", g.name, err)
	}
	if g.State() == Open {
		return nil, fmt.Errorf("guard %q: %w", g.name, ErrOpen)
	}
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("guard %q: wait for a bulkhead slot: %w", g.name, ctx.Err())
	}
	done, err := g.breaker.Allow()
	if err != nil {
		<-g.slots
		g.events.flush()
		return nil, fmt.Errorf("guard %q: %w: %w", g.name, ErrOpen, err)
	}
	g.events.flush()
	if g.limiter != nil {
		if err := g.limiter.Wait(ctx); err != nil {
			g.finish(done, errExcluded)
			return nil, fmt.Errorf("guard %q: wait for a rate token: %w", g.name, err)
		}
	}
	var released atomic.Bool
	return func(success, counted bool) {
		if released.CompareAndSwap(false, true) {
			if counted {
				g.shared.count(success)
			}
			g.finish(done, outcome(success, counted))
		}
	}, nil
}

// finish records a delivery's outcome in the breaker, frees the delivery's
// slot, and reports any change of state.
func (g *Guard) finish(done func(error), result error) {
	done(result)
	<-g.slots
	g.events.flush()
}

// outcome is the error the breaker is given for a release.
func outcome(success, counted bool) error {
	switch {
	case !counted:
		return errExcluded
	case success:
		return nil
	}
	return errFailed
}

// armWake (re)starts the timer that reports the move to half-open. It is
// called under the breaker's lock when the breaker opens; gobreaker moves to
// half-open only when it is next called, so without the timer an idle
// destination would be reported open long after its OpenTimeout.
func (g *Guard) armWake() {
	g.wakeMu.Lock()
	defer g.wakeMu.Unlock()
	timeout := g.cfg.Breaker.OpenTimeout
	// Read after gobreaker set its own expiry, so never earlier than it.
	g.openUntil = time.Now().Add(timeout)
	if g.wake == nil {
		g.wake = time.AfterFunc(timeout, g.onWake)
		return
	}
	g.wake.Reset(timeout)
}

// onWake runs on the timer's goroutine. gobreaker leaves open only once its
// expiry is strictly past, so a timer that fires on the dot waits a little
// more instead of finding the breaker still open and going quiet.
func (g *Guard) onWake() {
	g.wakeMu.Lock()
	if left := time.Until(g.openUntil); left >= 0 {
		g.wake.Reset(left + time.Millisecond)
		g.wakeMu.Unlock()
		return
	}
	g.wakeMu.Unlock()
	g.State()
}
