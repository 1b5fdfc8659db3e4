package changefeed

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/pglisten"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/service"
)

// Config configures a Listener. Zero fields take the documented defaults.
type Config struct {
	// Logger receives connection losses and failed reads. Default: discard.
	Logger *slog.Logger
	// From is where delivery starts: every change after it is delivered.
	// Nil: after every change committed at Start, so a new console
	// instance does not replay history (the transactions then in progress
	// are open: their rows are delivered when they commit).
	From *Cursor
	// PollInterval is how often the feed is read when no notification
	// arrives (a lost NOTIFY, a writer that does not send one). Default 2s.
	PollInterval time.Duration
	// SettleRetry is the first delay before reading again when committed
	// rows wait because more than MaxOpen transactions are open; it
	// doubles up to PollInterval. Default 20ms.
	SettleRetry time.Duration
	// Notifications is the process's one LISTEN connection
	// (internal/pglisten): the Listener subscribes to Channel on it, and
	// catches up after each of its (re)connects. The caller starts and
	// stops it. Nil: the Listener runs one of its own, configured by
	// ReconnectMin, ReconnectMax, QueryTimeout, Connect and Logger.
	Notifications *pglisten.Listener
	// ReconnectMin and ReconnectMax bound the backoff between attempts to
	// re-establish an own LISTEN connection. Defaults 100ms and 2s.
	ReconnectMin, ReconnectMax time.Duration
	// BatchSize is the most rows one read returns. Default 500.
	BatchSize int
	// QueryTimeout bounds each read. Default 5s.
	QueryTimeout time.Duration
	// Retention is how long rows are kept; Prune runs every PruneInterval.
	// Defaults 24h and 1m. A negative PruneInterval disables pruning here.
	Retention, PruneInterval time.Duration
	// Connect opens an own LISTEN connection. Default: a new connection
	// with the pool's connection settings, outside the pool.
	Connect func(ctx context.Context) (*pgx.Conn, error)
}

// Channel is the feed's LISTEN/NOTIFY channel, for a pglisten.Listener.
var Channel = pglisten.Channel{Name: channel, Listen: (*queries.Queries).ChangeListen}

func (c Config) withDefaults(pool *pgxpool.Pool) Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.PollInterval = orDefault(c.PollInterval, 2*time.Second)
	c.SettleRetry = orDefault(c.SettleRetry, 20*time.Millisecond)
	c.ReconnectMin = orDefault(c.ReconnectMin, 100*time.Millisecond)
	c.ReconnectMax = orDefault(c.ReconnectMax, 2*time.Second)
	c.QueryTimeout = orDefault(c.QueryTimeout, 5*time.Second)
	c.Retention = orDefault(c.Retention, 24*time.Hour)
	c.PruneInterval = orDefault(c.PruneInterval, time.Minute)
	if c.BatchSize <= 0 {
		c.BatchSize = 500
	}
	return c
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Subscriber receives a batch of changes, in delivery order (see the
// package comment), each with the Position after it. It is called
// from the Listener's goroutine with the Listener's lock held: it must
// return quickly and must not call the Listener.
type Subscriber func(batch []Change)

// Listener follows the feed for one process: one LISTEN connection
// (shared, see Config.Notifications), one reader, any number of
// subscribers. Start it once; Stop it once or more.
type Listener struct {
	pool *pgxpool.Pool
	cfg  Config
	life service.Lifecycle
	// wake holds at most one pending wake-up: wake-ups that arrive while
	// the reader reads fold into one more read.
	wake chan struct{}

	mu     sync.Mutex
	pos    Position           // guarded by mu: what has been delivered
	subs   map[int]Subscriber // guarded by mu
	nextID int                // guarded by mu
	status tracker            // guarded by mu

	// onRead, when set (by tests, before Start), is called after each read.
	onRead func(held bool, err error)
}

// NewListener returns a Listener reading the feed through pool.
func NewListener(pool *pgxpool.Pool, cfg Config) *Listener {
	return &Listener{
		pool: pool, cfg: cfg.withDefaults(pool),
		wake: make(chan struct{}, 1), subs: map[int]Subscriber{},
	}
}

// ErrStarted is returned by a second Start.
var ErrStarted = service.ErrStarted

// Start resolves the starting position, subscribes to the LISTEN
// connection and starts the reader and the pruner. It returns once the
// starting position is known (so Subscribe then returns a real one); the
// LISTEN connection may still be connecting. The goroutines run until
// Stop.
func (l *Listener) Start(ctx context.Context) error {
	setup := func(ctx context.Context) error {
		from, err := l.startPosition(ctx)
		if err != nil {
			return err
		}
		l.deliver(nil, from)
		return nil
	}
	return l.life.Start(ctx, setup, l.run)
}

// run follows the feed until ctx ends.
func (l *Listener) run(ctx context.Context) {
	notifications := l.cfg.Notifications
	if notifications == nil {
		notifications = pglisten.New(l.pool, pglisten.Config{
			Logger: l.cfg.Logger, ReconnectMin: l.cfg.ReconnectMin, ReconnectMax: l.cfg.ReconnectMax,
			QueryTimeout: l.cfg.QueryTimeout, Connect: l.cfg.Connect,
		})
		if err := notifications.Start(ctx); err != nil {
			l.cfg.Logger.Error("change feed: start LISTEN connection; polling only", slog.Any("error", err))
		}
		defer notifications.Stop()
	}
	defer notifications.Subscribe(Channel, l.Wake)()
	var wg sync.WaitGroup
	wg.Go(func() { l.readLoop(ctx) })
	if l.cfg.PruneInterval > 0 {
		wg.Go(func() { l.pruneLoop(ctx) })
	}
	wg.Wait()
}

// startPosition is Config.From, or else the position after every change
// committed now: every transaction below the snapshot's xmax is finished
// except those in progress, which stay open (at most MaxOpen: beyond
// them the position stops before the next one).
func (l *Listener) startPosition(ctx context.Context) (Position, error) {
	if l.cfg.From != nil {
		return At(*l.cfg.From), nil
	}
	qctx, cancel := context.WithTimeout(ctx, l.cfg.QueryTimeout)
	defer cancel()
	snap, err := queries.New(l.pool).ChangeSnapshotGet(qctx)
	if err != nil {
		return Position{}, fmt.Errorf("changefeed: read snapshot: %w", err)
	}
	inProgress := uint64s(snap.InProgress)
	pos := Position{After: Cursor{XID: snap.Xmax.Uint64}}
	if len(inProgress) > MaxOpen {
		pos.After = Cursor{XID: inProgress[MaxOpen]}
		inProgress = inProgress[:MaxOpen]
	}
	for _, x := range inProgress {
		pos.Open = append(pos.Open, Open{XID: x})
	}
	return pos, nil
}

// Stop ends the Listener's goroutines (and closes its own LISTEN
// connection, if it has one) and waits for them. It is safe to call more
// than once, and before Start.
func (l *Listener) Stop() { l.life.Stop() }

// Subscribe registers fn and returns the position it starts at: fn will
// receive every change that position does not include, and none that it
// does. The returned function unsubscribes. It panics before Start: the
// starting position is not known yet, and a subscriber that trusted a zero
// one would believe it had seen everything before the real one.
func (l *Listener) Subscribe(fn Subscriber) (Position, func()) {
	if !l.life.Started() {
		panic("changefeed: Subscribe before Start")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	id := l.nextID
	l.nextID++
	l.subs[id] = fn
	return l.pos, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.subs, id)
	}
}

// Position returns what the Listener has delivered.
func (l *Listener) Position() Position {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pos
}

// Wake asks for a read now, as a notification would. It never blocks.
func (l *Listener) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}
