package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/backoff"
	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/destination/guard"
	"github.com/switchyard/switchyard/internal/destination/jetstream"
	"github.com/switchyard/switchyard/internal/destination/webhook"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
)

// loadRoutes builds the dispatcher's routes from switchyard.destinations.
// A destination that cannot be set up (a bad URL, a missing secret, an
// unreachable NATS) still gets a route whose every attempt fails with the
// reason: its messages go dead after their attempts, and nothing else is
// slowed. Function destinations exist only in processes that embed the
// dispatcher, so they get no route here. Breaker changes are recorded and
// announced through changed. close releases connections.
func loadRoutes(ctx context.Context, pool *pgxpool.Pool, cfg config, owner string, metrics *outbox.Metrics, logger *slog.Logger, changed func()) (map[string]outbox.Route, func(), error) {
	record := outbox.BreakerRecorder(pool, owner, logger, changed)
	rows, err := queries.New(pool).DestinationList(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("load destinations: %w", err)
	}
	routes := map[string]outbox.Route{}
	var closers []func()
	for _, row := range rows {
		if row.Kind == "function" {
			continue
		}
		dest, closeDest, err := newDestination(ctx, row, cfg)
		if err != nil {
			logger.Error("destination misconfigured: its messages will fail", slog.String("destination", row.Name), slog.Any("error", err))
			dest = misconfigured(err)
		}
		if closeDest != nil {
			closers = append(closers, closeDest)
		}
		g, err := guard.New(row.Name, guardConfig(row), func(name string, from, to guard.State) {
			logger.Warn("circuit breaker changed state", slog.String("destination", name), slog.String("from", from.String()), slog.String("to", to.String()))
			record(name, from, to)
			metrics.SetBreakerState(name, int(to))
		})
		if err != nil {
			return nil, nil, err
		}
		metrics.SetBreakerState(row.Name, int(g.State()))
		routes[row.Name] = outbox.Route{
			Destination: dest,
			Retry:       backoff.Policy{Base: ms(row.RetryBaseMs), Cap: ms(row.RetryCapMs), MaxAttempts: int(row.MaxAttempts)},
			Timeout:     ms(row.TimeoutMs),
			Guard:       g,
		}
	}
	return routes, func() {
		for _, c := range closers {
			c()
		}
	}, nil
}

func newDestination(ctx context.Context, row queries.SwitchyardDestination, cfg config) (destination.Destination, func(), error) {
	switch row.Kind {
	case "webhook":
		var secret string
		if row.SecretRef != "" {
			if secret = cfg.getenv(row.SecretRef); secret == "" {
				return nil, nil, fmt.Errorf("signing secret: environment variable %s is empty", row.SecretRef)
			}
		}
		d, err := webhook.New(webhook.Config{URL: row.Address, Secret: secret, Timeout: ms(row.TimeoutMs)})
		return d, nil, err
	case "jetstream":
		d, err := jetstream.New(ctx, jetstream.Config{URL: cfg.natsURL, SubjectPrefix: row.Address, Timeout: ms(row.TimeoutMs)})
		if err != nil {
			return nil, nil, err
		}
		return d, d.Close, nil
	}
	return nil, nil, fmt.Errorf("unknown destination kind %q", row.Kind)
}

func misconfigured(cause error) destination.Destination {
	err := fmt.Errorf("destination misconfigured: %w", cause)
	return destination.Func(func(context.Context, destination.Delivery) (destination.Outcome, error) {
		return destination.Outcome{}, err
	})
}

func guardConfig(row queries.SwitchyardDestination) guard.Config {
	return guard.Config{
		Concurrency: int(row.Concurrency),
		Rate:        row.RatePerSecond,
		Burst:       int(row.Burst),
		Breaker: guard.BreakerConfig{
			FailureRatio: row.BreakerFailureRatio,
			MinRequests:  int(row.BreakerMinRequests),
			OpenTimeout:  ms(row.BreakerOpenMs),
		},
	}
}

func ms(n int32) time.Duration { return time.Duration(n) * time.Millisecond }
