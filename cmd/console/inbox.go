package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/internal/democustomer"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/queries"
)

// inboxHandlers is the registry of Go handlers that inbox sources name
// (switchyard.inbox_sources.handler). A program embedding Switchyard
// registers its own here.
func inboxHandlers(cfg config) inbox.Registry {
	return inbox.Registry{
		democustomer.Name: democustomer.Registration(democustomer.Config{Destination: cfg.demoCustomerDestination}),
	}
}

// newInboxReceiver builds the receiver of POST /inbox/:source from
// switchyard.inbox_sources, read once at start (like destinations). A
// source that cannot be set up (a missing secret, a bad one) is logged and
// answers 503 to its senders, who retry, until an operator fixes it and
// restarts the console. changed announces recorded failures (see
// inbox.ReceiverConfig).
func newInboxReceiver(ctx context.Context, pool *pgxpool.Pool, cfg config, reg prometheus.Registerer, logger *slog.Logger, changed func()) (*inbox.Receiver, error) {
	rows, err := queries.New(pool).InboxSourceList(ctx)
	if err != nil {
		return nil, fmt.Errorf("load inbox sources: %w", err)
	}
	sources := make([]inbox.Source, 0, len(rows))
	for _, row := range rows {
		src := inboxSource(row, cfg)
		if src.Problem != nil {
			logger.Error("inbox source misconfigured: its requests get 503", slog.String("source", row.Name), slog.Any("error", src.Problem))
		}
		sources = append(sources, src)
	}
	handlers := inboxHandlers(cfg)
	r := inbox.NewReceiver(inbox.ReceiverConfig{Pool: pool, Sources: sources, Handlers: handlers, Metrics: inbox.NewMetrics(reg), Changed: changed})
	for _, s := range sources {
		if _, ok := handlers[s.Handler]; !ok {
			logger.Error("inbox source names an unknown handler: its requests get 503", slog.String("source", s.Name), slog.String("handler", s.Handler))
		}
	}
	return r, nil
}

func inboxSource(row queries.SwitchyardInboxSource, cfg config) inbox.Source {
	src := inbox.Source{
		Name: row.Name, Scheme: row.Scheme, Handler: row.Handler,
		Policy: inbox.Policy{OutOfOrder: inbox.OutOfOrder(row.OutOfOrder), MaxAttempts: int(row.MaxAttempts)},
	}
	secrets := make([]string, 0, len(row.SecretRefs))
	for _, ref := range row.SecretRefs {
		secret := cfg.getenv(ref)
		if secret == "" {
			src.Problem = fmt.Errorf("signing secret: environment variable %s is empty", ref)
			return src
		}
		secrets = append(secrets, secret)
	}
	src.Verifier, src.Problem = inbox.NewVerifier(row.Scheme, secrets, time.Duration(row.ToleranceSeconds)*time.Second)
	return src
}
