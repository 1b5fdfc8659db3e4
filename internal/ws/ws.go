// Package ws is the WebSocket transport of collaborative triage: one
// socket per open triage page at /ws, on github.com/coder/websocket.
//
// It is a thin caller of internal/triage: a mutation that arrives here is
// triage.Engine.Mutate with the socket's account, exactly as the HTTP
// fallback calls it; the answer goes back on the socket. Everything else
// every client sees (an item's new state, who is looking) comes from the
// change feed, so every console instance pushes the changes of every
// other one to its own clients.
//
// Security, per socket: the session cookie authenticates the upgrade (the
// console's route table requires a viewer); the Origin must be the
// request's own host or one of Config.OriginPatterns (else 403, before
// any upgrade); the account's role is checked on every mutation by the
// engine (a viewer's is refused and audited as denied); a frame larger
// than ReadLimit closes the socket with 1009, a client that sends faster
// than its token bucket allows with 1008; every write has a deadline;
// pings find dead peers; the session is checked again every
// RecheckInterval and before every mutation, and a revocation on any
// instance closes the socket at once (auth.StreamGuard) with
// StatusSessionEnded.
//
// Memory per client is bounded: what waits to be written is the latest
// state of each changed item (coalesced by item, never a queue of every
// change) and who is in each view; a client with more than MaxPending
// items waiting is told to resync instead.
package ws

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/triage"
)

// StatusSessionEnded closes a socket whose session ended (revoked,
// expired, signed out): the page goes to the sign-in form instead of
// reconnecting.
const StatusSessionEnded websocket.StatusCode = 4401

// Config configures a Server. Engine and Presence are required.
type Config struct {
	Engine   *triage.Engine
	Presence *triage.Presence
	// Streams closes the sockets of revoked sessions. Optional.
	Streams *auth.StreamGuard
	// OriginPatterns are further origins (host patterns, as
	// websocket.AcceptOptions takes them) allowed besides the request's
	// own host.
	OriginPatterns []string
	// ReadLimit is the largest frame a client may send. Default 16 KiB.
	ReadLimit int64
	// Rate and Burst are each socket's token bucket of client messages.
	// Default 20/s, burst 40.
	Rate  rate.Limit
	Burst int
	// WriteTimeout bounds each write. Default 5s.
	WriteTimeout time.Duration
	// PingInterval is how often the server pings. Default 20s.
	PingInterval time.Duration
	// RecheckInterval is how often the session is checked again. Default
	// 60s.
	RecheckInterval time.Duration
	// PresenceRefresh is how often a socket refreshes its presence; keep
	// it well under the Presence's TTL. Default 10s.
	PresenceRefresh time.Duration
	// SweepInterval is how often this instance deletes expired presence.
	// Default 5s.
	SweepInterval time.Duration
	// MaxPending is how many items' states may wait for a slow client
	// before it is told to resync instead. Default 256.
	MaxPending int
	// MutationTimeout bounds each mutation and heartbeat: the socket's
	// reader waits for them, so one stuck behind a lock held elsewhere
	// would stop the socket reading (and answering pings) for as long.
	// The client is told the mutation was not applied and resends it
	// (the engine dedupes by mutation id). Default 10s.
	MutationTimeout time.Duration
	// ReleaseGrace is how long after the page of an item closed (its
	// socket closed cleanly) its account's claim is released, unless the
	// account looks at the item again by then (a reload, the failure's
	// page). Default 5s.
	ReleaseGrace time.Duration
	// AckDelay holds each mutation's answer this long after the commit
	// before it is sent: a hook for tests only (a browser test shows the
	// page's optimistic overlay before the ack). Zero in production.
	AckDelay time.Duration
	Logger   *slog.Logger
}

func (c Config) withDefaults() Config {
	c.ReadLimit = or(c.ReadLimit, 16<<10)
	c.Rate = or(c.Rate, 20)
	c.Burst = or(c.Burst, 40)
	c.WriteTimeout = or(c.WriteTimeout, 5*time.Second)
	c.PingInterval = or(c.PingInterval, 20*time.Second)
	c.RecheckInterval = or(c.RecheckInterval, 60*time.Second)
	c.PresenceRefresh = or(c.PresenceRefresh, 10*time.Second)
	c.SweepInterval = or(c.SweepInterval, 5*time.Second)
	c.MaxPending = or(c.MaxPending, 256)
	c.MutationTimeout = or(c.MutationTimeout, 10*time.Second)
	c.ReleaseGrace = or(c.ReleaseGrace, 5*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// MutationRetention is how long a mutation's stored answer is kept for
// resends: far longer than any reconnect.
const MutationRetention = 24 * time.Hour

// Server holds the process's triage sockets and fans the change feed out
// to them. Create it with New, Start it, subscribe Observe to the
// process's changefeed.Listener, and Stop it at shutdown (that closes
// every socket).
type Server struct {
	cfg  Config
	wake chan struct{}

	mu      sync.Mutex
	conns   map[*conn]struct{}  // guarded by mu
	items   map[int64]struct{}  // guarded by mu: items changed, not yet fanned out
	views   map[string]struct{} // guarded by mu: presence views changed
	ctx     context.Context     // guarded by mu: the sockets' parent; set by Start
	cancel  context.CancelFunc  // guarded by mu
	done    chan struct{}       // guarded by mu
	running sync.WaitGroup      // the sockets being served
}

// New returns a Server; it serves nothing before Start.
func New(cfg Config) *Server {
	return &Server{cfg: cfg.withDefaults(), wake: make(chan struct{}, 1),
		conns: map[*conn]struct{}{}, items: map[int64]struct{}{}, views: map[string]struct{}{}}
}

// ErrNotStarted is returned for a socket served before Start or after
// Stop.
var ErrNotStarted = errors.New("ws: server not started")

// Start runs the fan-out and the presence sweeper until Stop.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return errors.New("ws: server already started")
	}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.done = make(chan struct{})
	go s.run(s.ctx, s.done)
	return nil
}

// Stop closes every socket and ends the background work; idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	if cancel != nil {
		cancel() // under mu: see Serve
	}
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	<-done
	s.running.Wait()
}

// Observe is the changefeed.Subscriber: it notes which items and views
// changed and wakes the fan-out; it never blocks.
func (s *Server) Observe(batch []changefeed.Change) {
	s.mu.Lock()
	n := 0
	for _, c := range batch {
		switch c.Kind {
		case changefeed.KindTriage:
			if id, ok := parseID(c.Subject); ok {
				s.items[id] = struct{}{}
				n++
			}
		case changefeed.KindPresence:
			s.views[c.Subject] = struct{}{}
			n++
		}
	}
	s.mu.Unlock()
	if n > 0 {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Clients returns how many sockets are open.
func (s *Server) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	sweep := time.NewTicker(s.cfg.SweepInterval)
	defer sweep.Stop()
	prune := time.NewTicker(time.Hour)
	defer prune.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			s.fanOut(ctx)
		case <-prune.C:
			// Every instance prunes: the deletes are idempotent and hourly.
			qctx, cancel := context.WithTimeout(ctx, time.Minute)
			if _, err := triage.PruneMutations(qctx, s.cfg.Engine.Pool, MutationRetention); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("prune triage mutation answers", slog.Any("error", err))
			}
			cancel()
		case <-sweep.C:
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := s.cfg.Presence.Sweep(qctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("sweep expired presence", slog.Any("error", err))
			}
			cancel()
			s.reopenPending(ctx)
		}
	}
}

// fanOut reads each changed item and view once, for every socket of this
// process, and offers them to the sockets that show them.
func (s *Server) fanOut(ctx context.Context) {
	s.mu.Lock()
	ids, views := keys(s.items), keys(s.views)
	clear(s.items)
	clear(s.views)
	s.mu.Unlock()
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var states []triage.Item
	var who map[string][]string
	var err error
	if len(ids) > 0 {
		states, err = triage.GetMany(qctx, s.cfg.Engine.Pool, ids)
	}
	if err == nil && len(views) > 0 {
		who, err = s.cfg.Presence.Who(qctx, views)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if err != nil {
			c.offerResync() // what changed is unknown: the page reads it again
			continue
		}
		c.offer(states, who)
	}
	if err != nil && ctx.Err() == nil {
		s.cfg.Logger.Warn("read triage changes for the sockets", slog.Any("error", err))
	}
}

// reopenPending reopens the items settled while a failure of theirs came
// (triage.ReopenPending) whose failure committed after the settle's own
// check; it waits for a settle still in flight, so at most 10 s.
func (s *Server) reopenPending(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := triage.ReopenPending(qctx, s.cfg.Engine.Pool)
	if err != nil && ctx.Err() == nil {
		s.cfg.Logger.Warn("reopen items whose failure came during a settle", slog.Any("error", err))
	}
	if n > 0 && s.cfg.Engine.Notify != nil {
		s.cfg.Engine.Notify()
	}
}

func keys[K comparable](m map[K]struct{}) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
