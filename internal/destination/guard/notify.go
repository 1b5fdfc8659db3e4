package guard

import "sync"

// transition is one change of a breaker's state.
type transition struct{ from, to State }

// notifier delivers state changes to the callback outside the breaker's
// lock. gobreaker reports a change while holding its lock, where the
// callback must not run (it may call the Guard back, or be slow), so the
// change is queued there and delivered by flush, which every Guard method
// calls after it has called the breaker. Whoever flushes first delivers the
// whole queue, in order; a flush that finds another one running returns at
// once, leaving its changes to that one, so the callback never runs twice at
// once and a callback that calls the Guard does not deadlock.
type notifier struct {
	name string
	fn   func(name string, from, to State) // may be nil

	mu       sync.Mutex
	queue    []transition // guarded by mu
	flushing bool         // guarded by mu; a flush is delivering the queue
}

// push queues a change. It is called under the breaker's lock.
func (n *notifier) push(from, to State) {
	if n.fn == nil {
		return
	}
	n.mu.Lock()
	n.queue = append(n.queue, transition{from, to})
	n.mu.Unlock()
}

// flush delivers the queued changes, unless another flush is doing so.
// The queue is seen empty and flushing cleared under one lock, so a change
// pushed meanwhile is either delivered by this flush or finds flushing
// false and is delivered by its own.
func (n *notifier) flush() {
	n.mu.Lock()
	if n.flushing {
		n.mu.Unlock()
		return
	}
	n.flushing = true
	for len(n.queue) > 0 {
		t := n.queue[0]
		n.queue = n.queue[1:]
		n.mu.Unlock()
		n.deliver(t)
		n.mu.Lock()
	}
	n.flushing = false
	n.mu.Unlock()
}

// deliver calls the callback. Should it panic, flushing is cleared so that
// later changes are still delivered.
func (n *notifier) deliver(t transition) {
	delivered := false
	defer func() {
		if !delivered {
			n.mu.Lock()
			n.flushing = false
			n.mu.Unlock()
		}
	}()
	n.fn(n.name, t.from, t.to)
	delivered = true
}
