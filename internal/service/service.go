// Package service gives the process's long-lived background services (the
// dispatcher, the bulk replay runner, the statistics service, the change
// feed listener, the notifier, the LISTEN connection) one lifecycle, so
// that each does not hand-write its own: Start once, Stop any number of
// times, and Stop returns only when the service's goroutines have.
//
// A service runs under a context that keeps the values of the one Start
// was given but not its cancellation: a service outlives the command or
// request that started it until it is told to Stop.
package service

import (
	"context"
	"errors"
	"sync"
)

// ErrStarted is returned by a second Start, also after Stop: a stopped
// service is not restarted (make a new one).
var ErrStarted = errors.New("service: already started")

// Lifecycle is the start and stop state of one service. The zero value is
// ready to use; a service embeds one and calls it from its own Start and
// Stop. It is safe for concurrent use.
type Lifecycle struct {
	mu     sync.Mutex
	cancel context.CancelFunc // guarded by mu; nil until Start succeeded
	done   chan struct{}      // guarded by mu; closed when run has returned
	// stopped is set by the first Stop after Start; guarded by mu.
	stopped bool
}

// Start runs setup, if not nil, with ctx; if setup fails, Start returns
// its error and the service stays unstarted (Start may be called again).
// Then it runs run on its own goroutine and returns: run must return once
// its context is cancelled, which only Stop does. Start holds the
// Lifecycle's lock during setup, so a concurrent Start waits and then
// gets ErrStarted.
func (l *Lifecycle) Start(ctx context.Context, setup func(context.Context) error, run func(context.Context)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return ErrStarted
	}
	if setup != nil {
		if err := setup(ctx); err != nil {
			return err
		}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel, l.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		run(runCtx)
	}(l.done)
	return nil
}

// Started reports whether Start has succeeded (the service may since have
// been stopped).
func (l *Lifecycle) Started() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cancel != nil
}

// Stop cancels run's context and waits for run to return. It is safe to
// call before Start (it does nothing), more than once, and from several
// goroutines at once: each returns once run has. It reports whether this
// call was the one that stopped a started service, so that a service can
// do its last work (a final flush) exactly once.
func (l *Lifecycle) Stop() bool {
	l.mu.Lock()
	cancel, done, first := l.cancel, l.done, !l.stopped && l.cancel != nil
	if first {
		l.stopped = true
	}
	l.mu.Unlock()
	if cancel == nil {
		return false
	}
	cancel()
	<-done
	return first
}
