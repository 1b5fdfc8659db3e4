package guard

import (
	"sync/atomic"
	"time"
)

// shared is a Guard's part in the window the dispatchers share. The
// breaker trips on its own outcomes plus the peers' (the other processes'
// outcomes of the last Lookback), so that a freshly started process does
// not decide on its first few outcomes alone, and so that all processes
// see an outage. Every field is atomic: counting is on the delivery path.
type shared struct {
	successes, failures atomic.Uint64 // own counted outcomes not yet taken
	peerSuccesses       atomic.Uint64
	peerFailures        atomic.Uint64
	closedAt            atomic.Int64 // unix ns of the last move to closed; 0: none
}

func (s *shared) count(success bool) {
	if success {
		s.successes.Add(1)
		return
	}
	s.failures.Add(1)
}

func (s *shared) peers() (successes, failures uint64) {
	return s.peerSuccesses.Load(), s.peerFailures.Load()
}

// closed runs when the breaker closes after an open spell: gobreaker then
// forgets its own counts, and the peers' counts are forgotten too until
// they are read again over the time since (see Lookback). Otherwise the
// failures of the outage just over would trip it again at once.
func (s *shared) closed() {
	s.closedAt.Store(time.Now().UnixNano())
	s.peerSuccesses.Store(0)
	s.peerFailures.Store(0)
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
// last Lookback. It replaces the previous counts; they count only while
// the breaker is closed, and only toward opening it.
func (g *Guard) SetPeers(successes, failures uint64) {
	g.shared.peerSuccesses.Store(successes)
	g.shared.peerFailures.Store(failures)
}

// Lookback is how far back the peers' outcomes count: the breaker's Window,
// or the time since the breaker last closed if that is shorter (a breaker
// that closed after an open spell starts afresh, with every process).
func (g *Guard) Lookback() time.Duration {
	w := g.cfg.Breaker.Window
	if at := g.shared.closedAt.Load(); at != 0 {
		return min(w, time.Since(time.Unix(0, at)))
	}
	return w
}
