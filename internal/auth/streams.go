package auth

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
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

// ErrTooManyStreams is the cause of a watched context cancelled because
// its session or account opened more live streams than StreamLimits allow
// (the oldest stream goes first).
var ErrTooManyStreams = errors.New("auth: too many live streams")

// StreamLimits caps the live streams open at once on one instance.
type StreamLimits struct {
	PerSession int // one browser: a stream per open tab
	PerAccount int // all of one account's sessions
}

// DefaultStreamLimits are NewStreamGuard's: more tabs than anyone keeps
// open, far fewer than a client that opens streams in a loop.
var DefaultStreamLimits = StreamLimits{PerSession: 16, PerAccount: 48}

// StreamGuard ends long-lived requests (live streams) of sessions that are
// revoked, on every console instance: it follows the change feed's
// KindSessionRevoked changes, which every revocation appends in its own
// transaction. Subscribe Observe to the process's changefeed.Listener.
// Streams opened with Open are also capped per session and per account.
type StreamGuard struct {
	limits StreamLimits

	mu      sync.Mutex
	watched map[int64]map[*watch]struct{} // guarded by mu: by session id
	// Streams counted against the caps, oldest first; an evicted one
	// leaves both at once (it counts no more while it closes).
	bySession map[int64][]*watch // guarded by mu
	byAccount map[int64][]*watch // guarded by mu
}

type watch struct {
	cancel           context.CancelCauseFunc
	session, account int64
}

// NewStreamGuard returns an empty guard with DefaultStreamLimits.
func NewStreamGuard() *StreamGuard { return NewStreamGuardWith(DefaultStreamLimits) }

// NewStreamGuardWith returns an empty guard with limits (a zero field takes
// its default).
func NewStreamGuardWith(limits StreamLimits) *StreamGuard {
	if limits.PerSession <= 0 {
		limits.PerSession = DefaultStreamLimits.PerSession
	}
	if limits.PerAccount <= 0 {
		limits.PerAccount = DefaultStreamLimits.PerAccount
	}
	return &StreamGuard{
		limits: limits, watched: map[int64]map[*watch]struct{}{},
		bySession: map[int64][]*watch{}, byAccount: map[int64][]*watch{},
	}
}

// Open is Watch for the live stream of p, counted against the caps: when
// p's session or account already has as many as allowed, their oldest
// stream is cancelled with cause ErrTooManyStreams.
func (g *StreamGuard) Open(ctx context.Context, p Principal) (context.Context, func()) {
	return until(ctx, p.ExpiresAt, func(ctx context.Context) (context.Context, func()) { return g.open(ctx, p) })
}

func (g *StreamGuard) open(ctx context.Context, p Principal) (context.Context, func()) {
	ctx, w, stop := g.add(ctx, p.SessionID, p.UserID)
	g.mu.Lock()
	evict := func(m map[int64][]*watch, key int64, limit int) {
		for len(m[key]) >= limit {
			oldest := m[key][0]
			g.uncountLocked(oldest)
			oldest.cancel(ErrTooManyStreams)
		}
	}
	evict(g.bySession, w.session, g.limits.PerSession)
	evict(g.byAccount, w.account, g.limits.PerAccount)
	g.bySession[w.session] = append(g.bySession[w.session], w)
	g.byAccount[w.account] = append(g.byAccount[w.account], w)
	g.mu.Unlock()
	return ctx, stop
}

// uncountLocked takes w out of the caps' lists. g.mu must be held.
func (g *StreamGuard) uncountLocked(w *watch) {
	remove(g.bySession, w.session, w)
	remove(g.byAccount, w.account, w)
}

func remove(m map[int64][]*watch, key int64, w *watch) {
	list := slices.DeleteFunc(m[key], func(o *watch) bool { return o == w })
	if len(list) == 0 {
		delete(m, key)
		return
	}
	m[key] = list
}

// Watch returns a context derived from ctx that is cancelled, with cause
// ErrSessionRevoked, when session id is revoked, and with cause
// ErrSessionExpired at expires (zero: never). Call stop when the request
// ends. A revocation that committed before Watch is not seen: the caller
// checks the session again after Watch.
func (g *StreamGuard) Watch(ctx context.Context, id int64, expires time.Time) (context.Context, func()) {
	return until(ctx, expires, func(ctx context.Context) (context.Context, func()) { return g.watch(ctx, id) })
}

// until runs watch on ctx, which also ends at expires (zero: never).
func until(ctx context.Context, expires time.Time, watch func(context.Context) (context.Context, func())) (context.Context, func()) {
	if expires.IsZero() {
		return watch(ctx)
	}
	ctx, stopTimer := context.WithDeadlineCause(ctx, expires, ErrSessionExpired)
	wctx, stop := watch(ctx)
	return wctx, func() { stop(); stopTimer() }
}

func (g *StreamGuard) watch(ctx context.Context, id int64) (context.Context, func()) {
	ctx, _, stop := g.add(ctx, id, 0)
	return ctx, stop
}

// add watches session id (of account); stop also takes the watch out of
// the caps.
func (g *StreamGuard) add(ctx context.Context, id, account int64) (context.Context, *watch, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watch{cancel: cancel, session: id, account: account}
	g.mu.Lock()
	if g.watched[id] == nil {
		g.watched[id] = map[*watch]struct{}{}
	}
	g.watched[id][w] = struct{}{}
	g.mu.Unlock()
	return ctx, w, func() {
		g.mu.Lock()
		delete(g.watched[id], w)
		if len(g.watched[id]) == 0 {
			delete(g.watched, id)
		}
		g.uncountLocked(w)
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
