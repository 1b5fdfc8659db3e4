// Package registry keeps a dispatcher's routes in step with the
// switchyard.destinations table: it builds one outbox.Route per row (the
// destination, its retry policy, timeout and guard), rebuilds only the rows
// added or changed since the last read, and rereads the table periodically
// so that a destination added or changed there is used without a restart.
// serve, dispatch, the benchmarks and any program that embeds the
// dispatcher share it.
package registry

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
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

// DefaultInterval is how often Watch rereads switchyard.destinations.
const DefaultInterval = 10 * time.Second

// Config configures a Registry. Zero values take the documented defaults.
type Config struct {
	// Owner names this process in the breaker events it records
	// (outbox.DefaultOwner() for a console).
	Owner string
	// Metrics receives each destination's breaker state; nil: none.
	Metrics *outbox.Metrics
	// Logger; nil: discard.
	Logger *slog.Logger
	// Changed is called after a breaker change was recorded in the change
	// feed (it wakes the consoles); nil: nothing.
	Changed func()
	// Getenv reads the signing secrets that rows name (secret_ref,
	// secret_refs). Required for webhook destinations that name one.
	Getenv func(string) string
	// NATSURL is the NATS server of jetstream destinations.
	NATSURL string
	// Interval is how often Watch rereads the table; 0: DefaultInterval.
	Interval time.Duration
	// ShareInterval is how often Watch shares the breakers' outcomes with
	// the other processes (see Share); 0: DefaultShareInterval.
	ShareInterval time.Duration
	// HeadWait is the longest an aggregate's head, with messages queued
	// behind it, waits for its retry once its destination delivers again
	// (see Share); 0: DefaultHeadWait.
	HeadWait time.Duration
}

// Registry builds the dispatcher's routes from switchyard.destinations and
// keeps them in step with it. A destination that cannot be set up (a bad
// URL, a missing secret, an unreachable NATS) still gets a route whose every
// attempt fails with the reason: its messages go dead after their attempts,
// and nothing else is slowed. Function destinations exist only in processes
// that embed the dispatcher, so they get no route here. Breaker changes are
// recorded and announced through Config.Changed.
//
// A Registry is not safe for concurrent use: one goroutine calls Sync
// (directly or through Watch) and, at the end, Close.
type Registry struct {
	pool   *pgxpool.Pool
	cfg    Config
	record func(name string, from, to guard.State)
	built  map[string]built
	reload chan struct{} // Reload's request; buffered, one pending at most
	// health is, per destination, what this process's deliveries said
	// about it: the outcomes since the last probe decision (probeSooner),
	// which outlive a Share whose statement failed and whose outcomes may
	// be dropped, so that a recovery seen only in that Share still brings
	// the waiting heads forward; that decision; and when a delivery last
	// ended. Used by Share's caller only (Watch).
	health map[string]health
}

// health is what a process's deliveries to one destination said about it.
type health struct {
	successes, failures int64     // since the last decision
	healthy             bool      // the last decision
	lastOutcome         time.Time // when a delivery last ended (local clock)
}

// built is a route and the destinations row it was built from.
type built struct {
	row   queries.SwitchyardDestination
	route outbox.Route
	close func() // nil when there is nothing to release
}

// New returns a Registry that has built nothing yet: call Sync.
func New(pool *pgxpool.Pool, cfg Config) *Registry {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Getenv == nil {
		cfg.Getenv = func(string) string { return "" }
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.ShareInterval <= 0 {
		cfg.ShareInterval = DefaultShareInterval
	}
	if cfg.HeadWait <= 0 {
		cfg.HeadWait = DefaultHeadWait
	}
	if cfg.Metrics == nil {
		cfg.Metrics = outbox.NewMetrics(nil)
	}
	return &Registry{
		pool: pool, cfg: cfg,
		record: outbox.BreakerRecorder(pool, cfg.Owner, cfg.Logger, cfg.Changed),
		built:  map[string]built{},
		reload: make(chan struct{}, 1),
	}
}

// Reload makes Watch reread the table now rather than at its next tick:
// the configuration page calls it after a save, so that this process
// uses the edit at once (the others within Config.Interval). Unlike the
// rest of Registry, it is safe to call from any goroutine; requests
// coalesce.
func (r *Registry) Reload() {
	select {
	case r.reload <- struct{}{}:
	default:
	}
}

// Sync rereads the destinations and rebuilds the routes of those added or
// changed since the last Sync; unchanged ones keep their route, breaker
// state included. It returns the routes and whether they changed. What a
// replaced route held is released once a delivery that started with it must
// have ended (its timeout).
func (r *Registry) Sync(ctx context.Context) (map[string]outbox.Route, bool, error) {
	rows, err := queries.New(r.pool).DestinationList(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("load destinations: %w", err)
	}
	next := map[string]built{}
	for _, row := range rows {
		if row.Kind == "function" || row.Disabled {
			// A disabled destination gets no route: its messages are
			// not claimed and wait, burning no attempts, until it is
			// enabled again.
			continue
		}
		if prev, ok := r.built[row.Name]; ok && sameRow(prev.row, row) {
			next[row.Name] = prev
			continue
		}
		b, err := r.build(ctx, row)
		if err != nil {
			return nil, false, err
		}
		next[row.Name] = b
	}
	changed := len(next) != len(r.built)
	for name, prev := range r.built {
		// Each build makes a new guard: the guard tells a rebuilt route.
		if cur, ok := next[name]; !ok || cur.route.Guard != prev.route.Guard {
			changed = true
			if prev.close != nil {
				time.AfterFunc(max(prev.route.Timeout, 10*time.Second), prev.close)
			}
		}
	}
	r.built = next
	routes := make(map[string]outbox.Route, len(next))
	for name, b := range next {
		routes[name] = b.route
	}
	return routes, changed, nil
}

// Watch calls Sync every Config.Interval until ctx ends, and apply with the
// routes whenever they changed; and Share every Config.ShareInterval. A
// failed reread is logged and keeps the current routes; a failed Share is
// logged. It returns when ctx ends.
func (r *Registry) Watch(ctx context.Context, apply func(map[string]outbox.Route)) {
	tick := time.NewTicker(r.cfg.Interval)
	defer tick.Stop()
	share := time.NewTicker(r.cfg.ShareInterval)
	defer share.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-share.C:
			r.shareLogged(ctx)
			continue
		case <-tick.C:
		case <-r.reload:
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		next, changed, err := r.Sync(qctx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			r.cfg.Logger.Warn("reload destinations failed; keeping the current routes", slog.Any("error", err))
		case err == nil && changed:
			apply(next)
			r.cfg.Logger.Info("destinations reloaded", slog.Int("destinations", len(next)))
		}
	}
}

// Close releases every route's connections.
func (r *Registry) Close() {
	for _, b := range r.built {
		if b.close != nil {
			b.close()
		}
	}
	r.built = nil
}

func (r *Registry) build(ctx context.Context, row queries.SwitchyardDestination) (built, error) {
	dest, closeDest, err := r.open(ctx, row)
	if err != nil {
		r.cfg.Logger.Error("destination misconfigured: its messages will fail", slog.String("destination", row.Name), slog.Any("error", err))
		dest = misconfigured(err)
	}
	route, err := Route(row, dest, func(name string, from, to guard.State) {
		r.cfg.Logger.Warn("circuit breaker changed state", slog.String("destination", name), slog.String("from", from.String()), slog.String("to", to.String()))
		r.record(name, from, to)
		r.cfg.Metrics.SetBreakerState(name, int(to))
	})
	if err != nil {
		if closeDest != nil {
			closeDest()
		}
		return built{}, err
	}
	r.cfg.Metrics.SetBreakerState(row.Name, int(route.Guard.State()))
	return built{row: row, close: closeDest, route: route}, nil
}

// Route is the route a destinations row describes, delivering to dest:
// its retry policy, timeout and a new guard (bulkhead, rate, breaker)
// that reports its state changes to onChange.
func Route(row queries.SwitchyardDestination, dest destination.Destination, onChange func(name string, from, to guard.State)) (outbox.Route, error) {
	g, err := guard.New(row.Name, guard.Config{
		Concurrency: int(row.Concurrency),
		Rate:        row.RatePerSecond,
		Burst:       int(row.Burst),
		Breaker: guard.BreakerConfig{
			FailureRatio: row.BreakerFailureRatio,
			MinRequests:  int(row.BreakerMinRequests),
			OpenTimeout:  ms(row.BreakerOpenMs),
		},
	}, onChange)
	if err != nil {
		return outbox.Route{}, fmt.Errorf("destination %s: guard: %w", row.Name, err)
	}
	return outbox.Route{
		Destination: dest,
		Retry:       backoff.Policy{Base: ms(row.RetryBaseMs), Cap: ms(row.RetryCapMs), MaxAttempts: int(row.MaxAttempts)},
		Timeout:     ms(row.TimeoutMs),
		Guard:       g,
	}, nil
}

// open makes the destination a row describes; the func, when not nil,
// releases its connections.
func (r *Registry) open(ctx context.Context, row queries.SwitchyardDestination) (destination.Destination, func(), error) {
	switch row.Kind {
	case "webhook":
		secrets, err := Secrets(row, r.cfg.Getenv)
		if err != nil {
			return nil, nil, err
		}
		d, err := webhook.New(webhook.Config{
			URL: row.Address, Secrets: secrets, Timeout: ms(row.TimeoutMs),
			PermanentStatuses: PermanentStatuses(row), Connections: int(row.Concurrency),
		})
		if err != nil {
			return nil, nil, err
		}
		// A replaced route's idle connections are closed with it, not
		// left open until the client's idle timeout.
		return d, d.CloseIdleConnections, nil
	case "jetstream":
		d, err := jetstream.New(ctx, jetstream.Config{URL: r.cfg.NATSURL, SubjectPrefix: row.Address, Timeout: ms(row.TimeoutMs)})
		if err != nil {
			return nil, nil, err
		}
		return d, d.Close, nil
	}
	return nil, nil, fmt.Errorf("unknown destination kind %q", row.Kind)
}

// Secrets reads the signing secrets a row names, secret_ref first, then
// secret_refs (several during a rotation: every delivery is signed with
// each). A reference whose variable is empty is an error.
func Secrets(row queries.SwitchyardDestination, getenv func(string) string) ([]string, error) {
	refs := row.SecretRefs
	if row.SecretRef != "" {
		refs = append([]string{row.SecretRef}, refs...)
	}
	secrets := make([]string, 0, len(refs))
	for _, ref := range refs {
		secret := getenv(ref)
		if secret == "" {
			return nil, fmt.Errorf("signing secret: environment variable %s is empty", ref)
		}
		secrets = append(secrets, secret)
	}
	return secrets, nil
}

// PermanentStatuses is a row's delivery policy for webhook.Config: nil
// (the default policy) when permanent_statuses is NULL.
func PermanentStatuses(row queries.SwitchyardDestination) []int {
	if row.PermanentStatuses == nil {
		return nil
	}
	statuses := make([]int, len(row.PermanentStatuses))
	for i, s := range row.PermanentStatuses {
		statuses[i] = int(s)
	}
	return statuses
}

// misconfigured is a destination whose every attempt fails with cause.
func misconfigured(cause error) destination.Destination {
	err := fmt.Errorf("destination misconfigured: %w", cause)
	return destination.Func(func(context.Context, destination.Delivery) (destination.Outcome, error) {
		return destination.Outcome{}, err
	})
}

// sameRow reports whether two reads of a destination's row agree.
func sameRow(a, b queries.SwitchyardDestination) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) || !a.UpdatedAt.Equal(b.UpdatedAt) {
		return false
	}
	a.CreatedAt, a.UpdatedAt, b.CreatedAt, b.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	// DeepEqual tells a NULL permanent_statuses (nil: the default policy)
	// from '{}' (none permanent), as the policy does.
	return reflect.DeepEqual(a, b)
}

// ms reads the table's millisecond columns.
func ms(n int32) time.Duration { return time.Duration(n) * time.Millisecond }
