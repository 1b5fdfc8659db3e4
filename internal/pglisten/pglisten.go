// Package pglisten keeps a process's one LISTEN connection to PostgreSQL,
// shared by every part of the process that wants a wake-up: the change
// feed's listener (channel switchyard_changes) and the dispatcher
// (switchyard_outbox). One connection serves all channels, so a console
// process holds one LISTEN connection however many services it runs.
//
// A notification is a wake-up only, never data: a subscriber reacts by
// reading the table it follows. A lost connection therefore loses nothing
// as long as each subscriber catches up after it: the Listener calls every
// subscriber after each (re)connect, once its LISTENs are in place, so a
// change committed while the connection was down is read then, and one
// committed later is notified. Reconnects back off between ReconnectMin
// and ReconnectMax; meanwhile the subscribers' own polling covers.
//
// It is written here rather than taken from pgxlisten because channels are
// added while the connection runs (a dispatcher started after the change
// feed), each LISTEN statement goes through sqlc like all runtime SQL, and
// a handler must never delay the connection (subscribers only poke).
package pglisten

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/service"
)

// Channel is one LISTEN/NOTIFY channel: its name, as notifications carry
// it, and the sqlc query that LISTENs on it (a method expression such as
// (*queries.Queries).ChangeListen).
type Channel struct {
	Name   string
	Listen func(q *queries.Queries, ctx context.Context) error
}

// Config configures a Listener. Zero fields take the documented defaults.
type Config struct {
	// Logger receives connection losses. Default: discard.
	Logger *slog.Logger
	// ReconnectMin and ReconnectMax bound the backoff between attempts to
	// re-establish the connection. Defaults 100ms and 2s.
	ReconnectMin, ReconnectMax time.Duration
	// QueryTimeout bounds each LISTEN. Default 5s.
	QueryTimeout time.Duration
	// ConnectTimeout bounds connecting. Default: the pool's connect
	// timeout, or 15s if it has none. Connecting after a server restart
	// on a loaded machine takes seconds; an attempt cut short wastes the
	// server's work and starts over.
	ConnectTimeout time.Duration
	// Connect opens the connection. Default: a new connection with the
	// pool's settings, outside the pool (it stays in LISTEN state for
	// good, so it must not go back to the pool).
	Connect func(ctx context.Context) (*pgx.Conn, error)
}

func (c Config) withDefaults(pool *pgxpool.Pool) Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ReconnectMin <= 0 {
		c.ReconnectMin = 100 * time.Millisecond
	}
	if c.ReconnectMax <= 0 {
		c.ReconnectMax = 2 * time.Second
	}
	if c.QueryTimeout <= 0 {
		c.QueryTimeout = 5 * time.Second
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 15 * time.Second
		if pool != nil {
			c.ConnectTimeout = cmp.Or(pool.Config().ConnConfig.ConnectTimeout, c.ConnectTimeout)
		}
	}
	if c.Connect == nil {
		c.Connect = func(ctx context.Context) (*pgx.Conn, error) {
			return pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
		}
	}
	return c
}

// Listener is one LISTEN connection serving any number of channels and
// subscribers. Subscribe at any time; Start it once; Stop it once or more.
type Listener struct {
	cfg  Config
	life service.Lifecycle
	// added holds at most one pending signal: a channel was added while
	// no connection could take it.
	added chan struct{}

	mu        sync.Mutex
	channels  map[string]Channel        // guarded by mu: every channel subscribed to
	subs      map[string]map[int]func() // guarded by mu: by channel, by id
	nextID    int                       // guarded by mu
	listening map[string]bool           // guarded by mu: channels LISTENed on the open connection
	relisten  context.CancelFunc        // guarded by mu: ends the open connection's session
}

// New returns a Listener that connects with cfg.Connect (default: pool's
// settings).
func New(pool *pgxpool.Pool, cfg Config) *Listener {
	return &Listener{
		cfg: cfg.withDefaults(pool), added: make(chan struct{}, 1),
		channels: map[string]Channel{}, subs: map[string]map[int]func(){},
	}
}

// Subscribe calls wake on every notification on ch and after every
// (re)connect, once LISTEN is in place: wake must catch up on what it
// follows, and must not block (a poke of a one-slot channel fits). If the
// connection is up and already listens on ch, wake is called at once. A
// new channel makes the open connection reconnect to LISTEN on it too.
// The returned function unsubscribes.
func (l *Listener) Subscribe(ch Channel, wake func()) (unsubscribe func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.channels[ch.Name]; !ok {
		l.channels[ch.Name] = ch
		l.subs[ch.Name] = map[int]func(){}
		select {
		case l.added <- struct{}{}:
		default:
		}
		if l.relisten != nil {
			l.relisten()
		}
	}
	id := l.nextID
	l.nextID++
	l.subs[ch.Name][id] = wake
	if l.listening[ch.Name] {
		wake()
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.subs[ch.Name], id)
	}
}

// Start runs the connection until Stop. It returns at once: the
// connection may still be connecting.
func (l *Listener) Start(ctx context.Context) error {
	return l.life.Start(ctx, nil, l.run)
}

// Stop closes the connection and waits for its goroutine. It is safe to
// call before Start and more than once.
func (l *Listener) Stop() { l.life.Stop() }

// errRelisten ends a session on purpose: a channel was added.
var errRelisten = errors.New("pglisten: channel added")

func (l *Listener) run(ctx context.Context) {
	delay := l.cfg.ReconnectMin
	for ctx.Err() == nil {
		var up time.Time // when the session's LISTENs were in place; zero: never
		err := l.session(ctx, &up)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errRelisten) {
			delay = l.cfg.ReconnectMin
			continue
		}
		// It was up for a while: start over. An attempt that only took
		// long to fail (a connect timing out on a loaded server) is not:
		// it backs off like any other.
		if !up.IsZero() && time.Since(up) > l.cfg.ReconnectMax {
			delay = l.cfg.ReconnectMin
		}
		l.cfg.Logger.Warn("LISTEN connection lost; reconnecting",
			slog.Any("error", err), slog.Duration("after", delay))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, l.cfg.ReconnectMax)
	}
}

// session opens the connection, LISTENs on every channel, wakes every
// subscriber, then hands out notifications until the connection fails, a
// channel is added (errRelisten) or ctx ends. It sets *up once the
// connection listens.
func (l *Listener) session(ctx context.Context, up *time.Time) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	channels := l.begin(cancel)
	defer l.end()
	if len(channels) == 0 {
		select {
		case <-sctx.Done():
		case <-l.added:
		}
		return errRelisten
	}
	conn, err := l.open(sctx, channels)
	if err != nil {
		if ctx.Err() == nil && sctx.Err() != nil {
			return errRelisten
		}
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	// Only now, with every LISTEN in place, is a catch-up sure to miss
	// nothing: a change committed after it is read or notified.
	*up = time.Now()
	l.listened(channels)
	for {
		n, err := conn.WaitForNotification(sctx)
		if err != nil {
			if ctx.Err() == nil && sctx.Err() != nil {
				return errRelisten
			}
			return fmt.Errorf("pglisten: wait for notification: %w", err)
		}
		l.notify(n.Channel)
	}
}

// begin records how to end the session and returns the channels to
// LISTEN on, in a stable order.
func (l *Listener) begin(cancel context.CancelFunc) []Channel {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.relisten = cancel
	channels := make([]Channel, 0, len(l.channels))
	for _, ch := range l.channels {
		channels = append(channels, ch)
	}
	slices.SortFunc(channels, func(a, b Channel) int { return cmp.Compare(a.Name, b.Name) })
	return channels
}

func (l *Listener) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.relisten, l.listening = nil, nil
}

// open connects and LISTENs on channels.
func (l *Listener) open(ctx context.Context, channels []Channel) (*pgx.Conn, error) {
	connectCtx, cancelConnect := context.WithTimeout(ctx, l.cfg.ConnectTimeout)
	defer cancelConnect()
	conn, err := l.cfg.Connect(connectCtx)
	if err != nil {
		return nil, fmt.Errorf("pglisten: connect: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, l.cfg.QueryTimeout)
	defer cancel()
	q := queries.New(conn)
	for _, ch := range channels {
		if err := ch.Listen(q, cctx); err != nil {
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_ = conn.Close(closeCtx)
			return nil, fmt.Errorf("pglisten: listen on %s: %w", ch.Name, err)
		}
	}
	return conn, nil
}

// listened marks channels as listened on and wakes all their subscribers.
func (l *Listener) listened(channels []Channel) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listening = make(map[string]bool, len(channels))
	for _, ch := range channels {
		l.listening[ch.Name] = true
		for _, wake := range l.subs[ch.Name] {
			wake()
		}
	}
}

func (l *Listener) notify(channel string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, wake := range l.subs[channel] {
		wake()
	}
}
