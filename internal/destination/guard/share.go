package guard

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// shared is a Guard's part in the window the dispatchers share. The
// breaker trips on its own outcomes plus the peers' (the other processes'
// outcomes of the last Lookback), so that a freshly started process does
// not decide on its first few outcomes alone, and so that all processes
// see an outage. The own counts are atomic: counting is on the delivery
// path; the rest is read once per failure and written once per share.
type shared struct {
	successes, failures atomic.Uint64 // own counted outcomes not yet taken

	mu            sync.Mutex
	peerSuccesses uint64    // guarded by mu
	peerFailures  uint64    // guarded by mu
	closedAt      time.Time // guarded by mu; the last move to closed; zero: none
	askedAt       time.Time // guarded by mu; when Lookback was last read
}

func (s *shared) count(success bool) {
	if success {
		s.successes.Add(1)
		return
	}
	s.failures.Add(1)
}

// peers returns the peers' outcomes and when the breaker last closed.
func (s *shared) peers() (successes, failures uint64, closedAt time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peerSuccesses, s.peerFailures, s.closedAt
}

// closed runs when the breaker closes after an open spell: gobreaker then
// forgets its own counts, and the peers' counts are forgotten too until
// they are read again over the time since (see Lookback). Otherwise the
// failures of the outage just over would trip it again at once.
func (s *shared) closed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closedAt = time.Now()
	s.peerSuccesses, s.peerFailures = 0, 0
}

// TakeOutcomes returns the counted outcomes of this Guard's deliveries
// since the last call (or since New) and forgets them. The sharer adds
// them to the window the other processes read.
func (g *Guard) TakeOutcomes() (successes, failures uint64) {
	return g.shared.successes.Swap(0), g.shared.failures.Swap(0)
}

// ReturnOutcomes gives back outcomes that TakeOutcomes returned but that
// could not be shared: the next TakeOutcomes returns them again.
func (g *Guard) ReturnOutcomes(successes, failures uint64) {
	g.shared.successes.Add(successes)
	g.shared.failures.Add(failures)
}

// SetPeers gives the breaker the other processes' counted outcomes of the
// Lookback read last (the sharer reads Lookback, asks, then calls
// SetPeers). It replaces the previous counts; they count only while the
// breaker is closed, and only toward opening it. Counts asked for before
// the breaker last closed are dropped: they were read over a window that
// reaches back into the open spell, so they hold the outage's failures
// and would trip the breaker again on its first failure after closing.
func (g *Guard) SetPeers(successes, failures uint64) {
	s := &g.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.askedAt.Before(s.closedAt) {
		return
	}
	s.peerSuccesses, s.peerFailures = successes, failures
}

// Lookback is how far back the peers' outcomes count: the breaker's Window,
// or the time since the breaker last closed if that is shorter (a breaker
// that closed after an open spell starts afresh, with every process).
// Reading it marks the start of a share: see SetPeers.
func (g *Guard) Lookback() time.Duration {
	s := &g.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	s.askedAt = time.Now()
	w := g.cfg.Breaker.Window
	if !s.closedAt.IsZero() {
		return min(w, s.askedAt.Sub(s.closedAt))
	}
	return w
}

// probationZ is the one-sided 99 % normal quantile: on probation the
// breaker trips only when the failure ratio is above its threshold at that
// confidence.
const probationZ = 2.326

// readyToTrip decides the breaker's opening on failures of outcomes (its
// own plus the peers'). Normally the ratio decides. In the Window after a
// close the sample starts empty, and a small sample of a destination that
// fails 30 % of the time reaches 50 % often (10 outcomes: one time in
// six, and the check runs on every failure as the sample grows): the
// breaker would open again right after every outage. So on probation it
// trips only when the lower bound of the failure ratio's Wilson score
// interval reaches the threshold. A real outage still trips it within
// MinRequests outcomes (10 failures of 10 bound the ratio above 0.64).
func (g *Guard) readyToTrip(failures, outcomes uint64, closedAt time.Time) bool {
	b := g.cfg.Breaker
	if outcomes < uint64(b.MinRequests) || float64(failures) < b.FailureRatio*float64(outcomes) {
		return false
	}
	if closedAt.IsZero() || time.Since(closedAt) >= b.Window {
		return true
	}
	return wilsonLower(float64(failures), float64(outcomes), probationZ) >= b.FailureRatio
}

// wilsonLower is the lower bound of the Wilson score interval of a ratio
// of k in n at the normal quantile z.
func wilsonLower(k, n, z float64) float64 {
	p := k / n
	z2 := z * z
	centre := p + z2/(2*n)
	spread := z * math.Sqrt(p*(1-p)/n+z2/(4*n*n))
	return (centre - spread) / (1 + z2/n)
}
