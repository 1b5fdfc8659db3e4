package auth

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/switchyard/switchyard/internal/changefeed"
)

// ErrSessionRevoked is the cause of a watched context cancelled because its
// session was revoked; ErrSessionExpired, because it reached its absolute
// timeout.
var (
	ErrSessionRevoked = errors.New("auth: session revoked")
	ErrSessionExpired = errors.New("auth: session expired")
)

// StreamGuard ends long-lived requests (live streams) of sessions that are
// revoked, on every console instance: it follows the change feed's
// KindSessionRevoked changes, which every revocation appends in its own
// transaction. Subscribe Observe to the process's changefeed.Listener.
type StreamGuard struct {
	mu      sync.Mutex
	watched map[int64]map[*watch]struct{} // guarded by mu: by session id
}

type watch struct{ cancel context.CancelCauseFunc }

// NewStreamGuard returns an empty guard.
func NewStreamGuard() *StreamGuard {
	return &StreamGuard{watched: map[int64]map[*watch]struct{}{}}
}

// Watch returns a context derived from ctx that is cancelled, with cause
// ErrSessionRevoked, when session id is revoked, and with cause
// ErrSessionExpired at expires (zero: never). Call stop when the request
// ends. A revocation that committed before Watch is not seen: the caller
// checks the session again after Watch.
func (g *StreamGuard) Watch(ctx context.Context, id int64, expires time.Time) (context.Context, func()) {
	if expires.IsZero() {
		return g.watch(ctx, id)
	}
	ctx, stopTimer := context.WithDeadlineCause(ctx, expires, ErrSessionExpired)
	wctx, stop := g.watch(ctx, id)
	return wctx, func() { stop(); stopTimer() }
}

func (g *StreamGuard) watch(ctx context.Context, id int64) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watch{cancel: cancel}
	g.mu.Lock()
	if g.watched[id] == nil {
		g.watched[id] = map[*watch]struct{}{}
	}
	g.watched[id][w] = struct{}{}
	g.mu.Unlock()
	return ctx, func() {
		g.mu.Lock()
		delete(g.watched[id], w)
		if len(g.watched[id]) == 0 {
			delete(g.watched, id)
		}
		g.mu.Unlock()
		cancel(context.Canceled)
	}
}

// Watched returns how many requests are watched.
func (g *StreamGuard) Watched() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, ws := range g.watched {
		n += len(ws)
	}
	return n
}

// Observe is the changefeed.Subscriber: it cancels the watches of revoked
// sessions. It only cancels contexts, so it returns at once.
func (g *StreamGuard) Observe(batch []changefeed.Change) {
	for _, c := range batch {
		if c.Kind != changefeed.KindSessionRevoked {
			continue
		}
		var p struct {
			Sessions []int64 `json:"sessions"`
		}
		if json.Unmarshal(c.Payload, &p) != nil {
			continue
		}
		g.mu.Lock()
		for _, id := range p.Sessions {
			for w := range g.watched[id] {
				w.cancel(ErrSessionRevoked)
			}
		}
		g.mu.Unlock()
	}
}
