// Package lifecycle is the start and stop of a background service: Start
// runs its loop in one goroutine until Stop, which cancels the loop and
// waits for it to return. A service embeds a Loop and offers
// Start(ctx) error and an idempotent Stop() on top of it.
package lifecycle

import (
	"context"
	"fmt"
	"sync"
)

// Loop runs one goroutine between Start and Stop. Its zero value is ready;
// it is safe for concurrent use.
type Loop struct {
	mu     sync.Mutex
	cancel context.CancelFunc // guarded by mu; set while running
	done   chan struct{}      // guarded by mu; closed when run returned
}

// Start runs run in a goroutine, with a context that keeps ctx's values
// but not its cancellation: the loop ends at Stop, not when the caller's
// request or setup context does. It returns an error naming name if the
// loop is running already.
func (l *Loop) Start(ctx context.Context, name string, run func(context.Context)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return fmt.Errorf("%s: already started", name)
	}
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.done = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		run(ctx)
	}(l.done)
	return nil
}

// Stop cancels the loop and waits for run to return. It reports whether
// the loop was running: only the first Stop after a Start does.
func (l *Loop) Stop() bool {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel = nil
	l.mu.Unlock()
	if cancel == nil {
		return false
	}
	cancel()
	<-done
	return true
}
