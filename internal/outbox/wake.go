package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/pglisten"
	"github.com/switchyard/switchyard/internal/queries"
)

// WakeChannel is the LISTEN/NOTIFY channel that tells idle dispatchers
// that messages were committed, for a pglisten.Listener.
var WakeChannel = pglisten.Channel{Name: "switchyard_outbox", Listen: (*queries.Queries).OutboxListen}

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

// listen wakes the workers on every notification on WakeChannel (and after
// every reconnect of the LISTEN connection) until ctx ends. Without a
// shared connection (Config.Notifications) it runs one of its own.
func (d *Dispatcher) listen(ctx context.Context) {
	notifications := d.cfg.Notifications
	if notifications == nil {
		notifications = pglisten.New(d.pool, pglisten.Config{Logger: d.cfg.Logger})
		if err := notifications.Start(ctx); err != nil {
			d.cfg.Logger.Error("outbox: start LISTEN connection; polling only", "error", err)
		}
		defer notifications.Stop()
	}
	defer notifications.Subscribe(WakeChannel, d.Wake)()
	<-ctx.Done()
}
