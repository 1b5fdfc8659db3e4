package changefeed

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/service"
)

// Notifier sends the post-commit wake-up for writers that append often (a
// dispatcher marking many messages dead): Poke never blocks and never
// touches the database itself, and pokes that arrive while a NOTIFY is in
// flight fold into one more NOTIFY. Start it once; Stop it once or more.
type Notifier struct {
	pool    *pgxpool.Pool
	logger  *slog.Logger
	pending chan struct{} // at most one NOTIFY owed
	life    service.Lifecycle
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

// Start runs the sending goroutine until Stop.
func (n *Notifier) Start(ctx context.Context) error {
	return n.life.Start(ctx, nil, n.run)
}

func (n *Notifier) run(ctx context.Context) {
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
func (n *Notifier) Stop() { n.life.Stop() }
