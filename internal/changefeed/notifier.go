package changefeed

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Notifier sends the post-commit wake-up for writers that append often (a
// dispatcher marking many messages dead): Poke never blocks and never
// touches the database itself, and pokes that arrive while a NOTIFY is in
// flight fold into one more NOTIFY. Start it once; Stop it once or more.
type Notifier struct {
	pool    *pgxpool.Pool
	logger  *slog.Logger
	pending chan struct{} // at most one NOTIFY owed

	mu     sync.Mutex
	cancel context.CancelFunc // guarded by mu; nil until Start
	done   chan struct{}
}

// NewNotifier returns a Notifier sending through pool. A nil logger
// discards.
func NewNotifier(pool *pgxpool.Pool, logger *slog.Logger) *Notifier {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{pool: pool, logger: logger, pending: make(chan struct{}, 1)}
}

// Poke asks for a NOTIFY. Call it after the appending transaction
// committed.
func (n *Notifier) Poke() {
	select {
	case n.pending <- struct{}{}:
	default: // one is owed already: it will cover this commit too
	}
}

// Start runs the sending goroutine until Stop or until ctx ends.
func (n *Notifier) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cancel != nil {
		return ErrStarted
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel, n.done = cancel, make(chan struct{})
	go n.run(ctx)
	return nil
}

func (n *Notifier) run(ctx context.Context) {
	defer close(n.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.pending:
		}
		nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := Notify(nctx, n.pool)
		cancel()
		if err != nil && ctx.Err() == nil {
			// Listeners poll: a lost wake-up delays, never loses.
			n.logger.Warn("change feed notify failed", slog.Any("error", err))
		}
	}
}

// Stop ends the sending goroutine and waits for it. A poke still owed is
// dropped: the listeners' poll covers it.
func (n *Notifier) Stop() {
	n.mu.Lock()
	cancel, done := n.cancel, n.done
	n.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}
