package cli

import (
	"context"
	"log/slog"
	"maps"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/internal/inbox"
)

// inboxHandlers is the registry of Go handlers that inbox sources name
// (switchyard.inbox_sources.handler): the console ships none of its own, a
// program running it registers its own (Options.Handlers), and `console
// demo` adds the demo's (extras).
func inboxHandlers(cfg config, extras serveExtras) inbox.Registry {
	handlers := inbox.Registry{}
	maps.Copy(handlers, cfg.handlers)
	if extras != nil {
		maps.Copy(handlers, extras.inboxHandlers())
	}
	return handlers
}

// newInboxReceiver builds the receiver of POST /inbox/:source from
// switchyard.inbox_sources and keeps it in step with that table (like
// destinations) until ctx ends or stop is called: a source added or
// changed there is used within inbox.DefaultReloadInterval. A source that
// cannot be set up is logged and answers 503 to its senders, who retry,
// until an operator fixes its row. changed announces recorded failures
// (see inbox.ReceiverConfig).
func newInboxReceiver(ctx context.Context, pool *pgxpool.Pool, cfg config, handlers inbox.Registry, reg prometheus.Registerer, logger *slog.Logger, changed func()) (*inbox.Receiver, func(), error) {
	r := inbox.NewReceiver(inbox.ReceiverConfig{
		Pool: pool, Handlers: handlers, Metrics: inbox.NewMetrics(reg), Changed: changed,
		Getenv: cfg.getenv, Logger: logger,
	})
	if err := r.Load(ctx); err != nil {
		return nil, nil, err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		r.Watch(watchCtx)
	}()
	return r, func() {
		stopWatch()
		<-watched
	}, nil
}
