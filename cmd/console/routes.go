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

// routesReloadInterval is how often a running dispatcher rereads
// switchyard.destinations, so that a destination added or changed there is
// used without a restart.
const routesReloadInterval = 10 * time.Second

// routeSet builds the dispatcher's routes from switchyard.destinations and
// keeps them in step with it. A destination that cannot be set up (a bad
// URL, a missing secret, an unreachable NATS) still gets a route whose every
// attempt fails with the reason: its messages go dead after their attempts,
// and nothing else is slowed. Function destinations exist only in processes
// that embed the dispatcher, so they get no route here. Breaker changes are
// recorded and announced through changed. Only one goroutine may use a
// routeSet.
type routeSet struct {
	pool    *pgxpool.Pool
	cfg     config
	metrics *outbox.Metrics
	logger  *slog.Logger
	record  func(name string, from, to guard.State)
	built   map[string]builtRoute
}

// builtRoute is a route and the destinations row it was built from.
type builtRoute struct {
	row   queries.SwitchyardDestination
	route outbox.Route
	close func() // nil when there is nothing to release
}

func newRouteSet(pool *pgxpool.Pool, cfg config, owner string, metrics *outbox.Metrics, logger *slog.Logger, changed func()) *routeSet {
	return &routeSet{
		pool: pool, cfg: cfg, metrics: metrics, logger: logger,
		record: outbox.BreakerRecorder(pool, owner, logger, changed),
		built:  map[string]builtRoute{},
	}
}

// sync rereads the destinations and rebuilds the routes of those added or
// changed since the last sync; unchanged ones keep their route, breaker
// state included. It returns the routes and whether they changed. What a
// replaced route held is released once a delivery that started with it must
// have ended (its timeout).
func (s *routeSet) sync(ctx context.Context) (map[string]outbox.Route, bool, error) {
	rows, err := queries.New(s.pool).DestinationList(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("load destinations: %w", err)
	}
	next := map[string]builtRoute{}
	for _, row := range rows {
		if row.Kind == "function" {
			continue
		}
		if prev, ok := s.built[row.Name]; ok && sameDestination(prev.row, row) {
			next[row.Name] = prev
			continue
		}
		b, err := s.build(ctx, row)
		if err != nil {
			return nil, false, err
		}
		next[row.Name] = b
	}
	changed := len(next) != len(s.built)
	for name, prev := range s.built {
		// Each build makes a new guard: the guard tells a rebuilt route.
		if cur, ok := next[name]; !ok || cur.route.Guard != prev.route.Guard {
			changed = true
			if prev.close != nil {
				time.AfterFunc(max(prev.route.Timeout, 10*time.Second), prev.close)
			}
		}
	}
	s.built = next
	routes := make(map[string]outbox.Route, len(next))
	for name, b := range next {
		routes[name] = b.route
	}
	return routes, changed, nil
}

func (s *routeSet) build(ctx context.Context, row queries.SwitchyardDestination) (builtRoute, error) {
	dest, closeDest, err := newDestination(ctx, row, s.cfg)
	if err != nil {
		s.logger.Error("destination misconfigured: its messages will fail", slog.String("destination", row.Name), slog.Any("error", err))
		dest = misconfigured(err)
	}
	g, err := guard.New(row.Name, guardConfig(row), func(name string, from, to guard.State) {
		s.logger.Warn("circuit breaker changed state", slog.String("destination", name), slog.String("from", from.String()), slog.String("to", to.String()))
		s.record(name, from, to)
		s.metrics.SetBreakerState(name, int(to))
	})
	if err != nil {
		if closeDest != nil {
			closeDest()
		}
		return builtRoute{}, err
	}
	s.metrics.SetBreakerState(row.Name, int(g.State()))
	return builtRoute{row: row, close: closeDest, route: outbox.Route{
		Destination: dest,
		Retry:       backoff.Policy{Base: ms(row.RetryBaseMs), Cap: ms(row.RetryCapMs), MaxAttempts: int(row.MaxAttempts)},
		Timeout:     ms(row.TimeoutMs),
		Guard:       g,
	}}, nil
}

// close releases every route's connections.
func (s *routeSet) close() {
	for _, b := range s.built {
		if b.close != nil {
			b.close()
		}
	}
	s.built = nil
}

// sameDestination reports whether two reads of a destination's row agree.
func sameDestination(a, b queries.SwitchyardDestination) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) || !a.UpdatedAt.Equal(b.UpdatedAt) {
		return false
	}
	a.CreatedAt, a.UpdatedAt, b.CreatedAt, b.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return a == b
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
