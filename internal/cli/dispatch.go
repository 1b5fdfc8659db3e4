package cli

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/destination/registry"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/pglisten"
)

// dispatch runs `console dispatch`: dispatcher workers only, until ctx is
// cancelled; then in-flight deliveries finish or are released. A database
// it cannot reach at start (DATABASE_URL) it waits for, as
// cfg.databaseWait says (by default until it is stopped): a dispatcher
// started before its database, or during a restart, comes up when the
// database does, instead of exiting into its supervisor's restart loop,
// where every start is a burst of new connections. Stopped while
// waiting, it exits cleanly.
func dispatch(ctx context.Context, cfg config, logger *slog.Logger) error {
	var stop func()
	err := cfg.awaitDatabase(ctx, logger, func(ctx context.Context) (err error) {
		stop, err = startDispatching(ctx, cfg, logger)
		return err
	})
	if ctx.Err() != nil {
		if stop != nil {
			stop()
		}
		return nil // stopped, perhaps while waiting: a clean exit
	}
	if err != nil {
		return err
	}
	<-ctx.Done()
	stop()
	return nil
}

// startDispatching opens and checks the database and starts the
// dispatcher with its wake-ups; stop stops them and closes the database.
// On an error everything it opened is closed again.
func startDispatching(ctx context.Context, cfg config, logger *slog.Logger) (stop func(), err error) {
	db, migrator, err := openMigrated(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	migrator.Close()
	wakes, stopWakes, err := startWakeups(ctx, db, logger)
	if err != nil {
		db.Close()
		return nil, err
	}
	stopDispatcher, _, err := startDispatcher(ctx, db, cfg, logger, prometheus.NewRegistry(), wakes)
	if err != nil {
		stopWakes()
		db.Close()
		return nil, err
	}
	return func() {
		stopDispatcher()
		stopWakes()
		db.Close()
	}, nil
}

// awaitDatabase runs start, which opens the database, and again while it
// fails because the database cannot be reached, for as long as
// cfg.databaseWait says (databaseWait.await). The embedded server is
// started by the console itself: nothing to wait for.
func (cfg config) awaitDatabase(ctx context.Context, logger *slog.Logger, start func(context.Context) error) error {
	limit := cfg.databaseWait
	if cfg.databaseURL == "" {
		limit = 0
	}
	return defaultDatabaseWait(limit).await(ctx, logger, start)
}

// wakeups are the process's one LISTEN connection and one coalescing
// NOTIFY sender for the change feed, shared by all its services.
type wakeups struct {
	listen   *pglisten.Listener
	notifier *changefeed.Notifier
}

// startWakeups starts both; stop stops them, after the services that use
// them have stopped.
func startWakeups(ctx context.Context, db *database, logger *slog.Logger) (wakeups, func(), error) {
	w := wakeups{
		listen:   pglisten.New(db.pool, pglisten.Config{Logger: logger.With(slog.String("component", "pglisten"))}),
		notifier: changefeed.NewNotifier(db.pool, logger),
	}
	if err := w.listen.Start(ctx); err != nil {
		return wakeups{}, nil, err
	}
	if err := w.notifier.Start(ctx); err != nil {
		w.listen.Stop()
		return wakeups{}, nil, err
	}
	return w, func() { w.notifier.Stop(); w.listen.Stop() }, nil
}

// startDispatcher starts cfg.workers dispatcher workers over the configured
// destinations; stop drains them and closes the destinations; reload
// rereads the destinations now (registry.Registry.Reload).
func startDispatcher(ctx context.Context, db *database, cfg config, logger *slog.Logger, reg prometheus.Registerer, wakes wakeups) (stop, reload func(), err error) {
	owner := outbox.DefaultOwner()
	metrics := outbox.NewMetrics(reg)
	// Dead letters and breaker changes go to the change feed; the notifier
	// wakes the consoles' listeners after each such commit, coalesced.
	notifier := wakes.notifier
	logger = logger.With(slog.String("component", "dispatcher"))
	routes := registry.New(db.pool, registry.Config{
		Owner: owner, Metrics: metrics, Logger: logger, Changed: notifier.Poke,
		Getenv: cfg.getenv, NATSURL: cfg.natsURL,
	})
	initial, _, err := routes.Sync(ctx)
	if err != nil {
		return nil, nil, err
	}
	if len(initial) == 0 {
		// Not fatal: a console may run before any destination exists.
		logger.Warn("no destinations configured: the dispatcher has nothing to deliver to")
	}
	d := outbox.New(db.pool, outbox.Config{
		Owner: owner, Workers: cfg.workers, LeaseDuration: cfg.lease, Routes: initial,
		Logger: logger, Metrics: metrics, Changed: notifier.Poke, Notifications: wakes.listen,
	})
	if err := d.Start(ctx); err != nil {
		routes.Close()
		return nil, nil, err
	}
	reloadCtx, stopReload := context.WithCancel(ctx)
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		routes.Watch(reloadCtx, d.SetRoutes)
	}()
	logger.Info("dispatcher started", slog.Int("workers", cfg.workers), slog.Int("destinations", len(initial)))
	return func() {
		stopReload()
		<-reloaded
		d.Stop()
		routes.Close()
		logger.Info("dispatcher stopped")
	}, routes.Reload, nil
}
