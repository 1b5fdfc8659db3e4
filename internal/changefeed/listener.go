package changefeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
)

// Config configures a Listener. Zero fields take the documented defaults.
type Config struct {
	// Logger receives connection losses and failed reads. Default: discard.
	Logger *slog.Logger
	// From is where delivery starts: the first change delivered is the
	// first one after it. Nil: after the newest settled change at Start,
	// so a new console instance does not replay history.
	From *Cursor
	// PollInterval is how often the feed is read when no notification
	// arrives (a lost NOTIFY, a writer that does not send one). Default 2s.
	PollInterval time.Duration
	// SettleRetry is the first delay before reading again when committed
	// rows wait behind the watermark; it doubles up to PollInterval.
	// Default 20ms.
	SettleRetry time.Duration
	// ReconnectMin and ReconnectMax bound the backoff between attempts to
	// re-establish the LISTEN connection. Defaults 100ms and 2s.
	ReconnectMin, ReconnectMax time.Duration
	// BatchSize is the most rows one read returns. Default 500.
	BatchSize int
	// QueryTimeout bounds each read. Default 5s.
	QueryTimeout time.Duration
	// Retention is how long rows are kept; Prune runs every PruneInterval.
	// Defaults 24h and 1m. A negative PruneInterval disables pruning here.
	Retention, PruneInterval time.Duration
	// Connect opens the dedicated LISTEN connection. Default: a new
	// connection with the pool's connection settings, outside the pool.
	Connect func(ctx context.Context) (*pgx.Conn, error)
}

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
	if c.Connect == nil {
		c.Connect = func(ctx context.Context) (*pgx.Conn, error) {
			return pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
		}
	}
	return c
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Subscriber receives a batch of changes, in cursor order. It is called
// from the Listener's goroutine with the Listener's lock held: it must
// return quickly and must not call the Listener.
type Subscriber func(batch []Change)

// Listener follows the feed for one process: one LISTEN connection, one
// reader, any number of subscribers. Start it once; Stop it once or more.
type Listener struct {
	pool *pgxpool.Pool
	cfg  Config
	// wake holds at most one pending wake-up: wake-ups that arrive while
	// the reader reads fold into one more read.
	wake chan struct{}

	mu     sync.Mutex
	cursor Cursor             // guarded by mu: the last change delivered
	subs   map[int]Subscriber // guarded by mu
	nextID int                // guarded by mu
	cancel context.CancelFunc // guarded by mu; nil until Start
	done   chan struct{}      // closed when every goroutine has returned

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
var ErrStarted = errors.New("changefeed: listener already started")

// Start resolves the starting cursor and starts the LISTEN connection, the
// reader and the pruner. It returns once the starting cursor is known (so
// Subscribe then returns a real cursor); the LISTEN connection may still be
// connecting. The goroutines run until Stop or until ctx ends.
func (l *Listener) Start(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return ErrStarted
	}
	from, err := l.startCursor(ctx)
	if err != nil {
		return err
	}
	l.cursor = from
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel, l.done = cancel, make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { l.listenLoop(ctx) })
	wg.Go(func() { l.readLoop(ctx) })
	if l.cfg.PruneInterval > 0 {
		wg.Go(func() { l.pruneLoop(ctx) })
	}
	go func() { wg.Wait(); close(l.done) }()
	return nil
}

func (l *Listener) startCursor(ctx context.Context) (Cursor, error) {
	if l.cfg.From != nil {
		return *l.cfg.From, nil
	}
	qctx, cancel := context.WithTimeout(ctx, l.cfg.QueryTimeout)
	defer cancel()
	head, err := queries.New(l.pool).ChangeHead(qctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return Cursor{}, nil
	}
	if err != nil {
		return Cursor{}, fmt.Errorf("changefeed: read head: %w", err)
	}
	return toCursor(head.Xid, head.ID), nil
}

// Stop ends the Listener's goroutines and closes its LISTEN connection,
// and waits for them. It is safe to call more than once, and before Start.
func (l *Listener) Stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Subscribe registers fn and returns the cursor it starts after: fn will
// receive every change after that cursor, and none before. The returned
// function unsubscribes. It panics before Start: the starting cursor is
// not known yet, and a subscriber that trusted a zero cursor would believe
// it had seen everything before the real one.
func (l *Listener) Subscribe(fn Subscriber) (Cursor, func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel == nil {
		panic("changefeed: Subscribe before Start")
	}
	id := l.nextID
	l.nextID++
	l.subs[id] = fn
	return l.cursor, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.subs, id)
	}
}

// Cursor returns the cursor of the last change delivered.
func (l *Listener) Cursor() Cursor {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cursor
}

// Wake asks for a read now, as a notification would. It never blocks.
func (l *Listener) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}
