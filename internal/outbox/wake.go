package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
)

// wakeChannel is the LISTEN/NOTIFY channel that tells idle dispatchers that
// messages were committed.
const wakeChannel = "switchyard_outbox"

// Notify wakes idle dispatchers on every process at once. Call it AFTER
// the transaction that enqueued has committed, never inside it: a NOTIFY
// inside a transaction serialises every committing transaction of the
// database. It is only an optimisation: dispatchers poll anyway
// (Config.IdlePoll).
func Notify(ctx context.Context, pool *pgxpool.Pool) error {
	if err := queries.New(pool).OutboxNotify(ctx); err != nil {
		return fmt.Errorf("outbox: notify: %w", err)
	}
	return nil
}

// listenLoop holds one connection listening on wakeChannel and wakes the
// workers on each notification. A lost connection is re-established after a
// pause; meanwhile the workers' polling covers.
func (d *Dispatcher) listenLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if err := d.listen(ctx); err != nil && ctx.Err() == nil {
			d.cfg.Logger.Warn("outbox listen connection lost; polling meanwhile", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (d *Dispatcher) listen(ctx context.Context) error {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	// The connection leaves the pool for good: it stays in LISTEN state.
	raw := conn.Hijack()
	defer raw.Close(context.WithoutCancel(ctx))
	if _, err := raw.Exec(ctx, "LISTEN "+wakeChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	for {
		if _, err := raw.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		d.Wake()
	}
}
