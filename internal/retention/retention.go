// Package retention deletes what the console keeps only for a while:
// expired idempotency keys, settled inbox events, old circuit breaker
// changes and finished bulk replay jobs. Without it every operator action,
// every received webhook and every breaker flip adds a row for good.
//
// A Service runs one pass every Interval until Stop. Each pass deletes in
// batches of BatchSize rows, oldest first, each batch one statement under
// StatementTimeout, so that no statement holds its locks for long and a
// slow one is abandoned rather than left running. Several instances may
// run at once: every delete is idempotent (it deletes rows that match its
// condition, rechecked on the row), so a second instance only finds less
// to do. What must never go is never selected: failed, parked and held
// inbox events wait for an operator; a running replay job is running; the
// latest change of each breaker is its current state.
//
// The outbox's own history and the change feed have their retention in
// their packages (outbox.Prune, changefeed.Prune), run by the dispatcher
// and the listener.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/service"
)

// Config says how long each kind of row is kept. Zero fields take the
// defaults.
type Config struct {
	// InboxEvents: processed (or stale) inbox events are deleted this long
	// after they were received. Default 30 days. A source that redelivers
	// an event after this long has it applied again, so keep it longer than
	// any sender's redelivery window.
	InboxEvents time.Duration
	// BreakerEvents: circuit breaker changes are deleted after this long,
	// all but the latest of each destination and owner. Default 30 days.
	BreakerEvents time.Duration
	// ReplayJobs: finished (done or cancelled) bulk replay jobs are
	// deleted this long after they finished. Default 30 days.
	ReplayJobs time.Duration
	// Idempotency keys have their own lifetime, chosen when they are
	// stored (idempotency.Config.TTL); retention deletes them once
	// expired.

	// Interval between passes. Default 5 minutes.
	Interval time.Duration
	// StatementTimeout bounds every delete. Default 30s.
	StatementTimeout time.Duration
	// BatchSize bounds the rows one delete takes. Default 5000.
	BatchSize int
	Logger    *slog.Logger
}

func (c Config) withDefaults() Config {
	const month = 30 * 24 * time.Hour
	c.InboxEvents = orDefault(c.InboxEvents, month)
	c.BreakerEvents = orDefault(c.BreakerEvents, month)
	c.ReplayJobs = orDefault(c.ReplayJobs, month)
	c.Interval = orDefault(c.Interval, 5*time.Minute)
	c.StatementTimeout = orDefault(c.StatementTimeout, 30*time.Second)
	if c.BatchSize <= 0 {
		c.BatchSize = 5000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Pruned counts what one pass deleted.
type Pruned struct {
	IdempotencyKeys, InboxEvents, BreakerEvents, ReplayJobs int64
}

// Prune runs one pass on pool with cfg: every table in turn, in batches
// until a batch comes back short. It stops at the first error, returning
// what it deleted so far.
func Prune(ctx context.Context, pool *pgxpool.Pool, cfg Config) (Pruned, error) {
	cfg = cfg.withDefaults()
	q := queries.New(pool)
	batch := int32(cfg.BatchSize)
	var p Pruned
	steps := []struct {
		name  string
		count *int64
		run   func(context.Context) (int64, error)
	}{
		{"idempotency keys", &p.IdempotencyKeys, func(ctx context.Context) (int64, error) {
			return q.IdempotencyKeyPruneBatch(ctx, batch)
		}},
		{"inbox events", &p.InboxEvents, func(ctx context.Context) (int64, error) {
			return q.InboxEventPrune(ctx, queries.InboxEventPruneParams{AgeSeconds: cfg.InboxEvents.Seconds(), BatchSize: batch})
		}},
		{"breaker events", &p.BreakerEvents, func(ctx context.Context) (int64, error) {
			return q.BreakerEventPrune(ctx, queries.BreakerEventPruneParams{AgeSeconds: cfg.BreakerEvents.Seconds(), BatchSize: batch})
		}},
		{"replay jobs", &p.ReplayJobs, func(ctx context.Context) (int64, error) {
			return q.ReplayJobPrune(ctx, queries.ReplayJobPruneParams{AgeSeconds: cfg.ReplayJobs.Seconds(), BatchSize: batch})
		}},
	}
	for _, s := range steps {
		n, err := drain(ctx, cfg, s.run)
		*s.count = n
		if err != nil {
			return p, fmt.Errorf("retention: prune %s: %w", s.name, err)
		}
	}
	return p, nil
}

// drain repeats one batched delete, each under the statement timeout,
// until a batch comes back short.
func drain(ctx context.Context, cfg Config, batch func(context.Context) (int64, error)) (int64, error) {
	var total int64
	for {
		bctx, cancel := context.WithTimeout(ctx, cfg.StatementTimeout)
		n, err := batch(bctx)
		cancel()
		total += n
		if err != nil || n < int64(cfg.BatchSize) {
			return total, err
		}
	}
}

// Service runs Prune every Interval. Start it once; Stop is idempotent.
type Service struct {
	cfg  Config
	pool *pgxpool.Pool
	loop service.Lifecycle
}

// New returns a Service on pool; Start runs it.
func New(pool *pgxpool.Pool, cfg Config) *Service {
	return &Service{cfg: cfg.withDefaults(), pool: pool}
}

// Start runs a first pass at once and then one every Interval, until
// Stop. It returns an error if already started.
func (s *Service) Start(ctx context.Context) error {
	return s.loop.Start(ctx, nil, s.run)
}

// Stop ends the service, abandoning a pass in progress (each batch is its
// own statement, so what was deleted stays deleted). It is idempotent.
func (s *Service) Stop() { s.loop.Stop() }

func (s *Service) run(ctx context.Context) {
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	for {
		p, err := Prune(ctx, s.pool, s.cfg)
		switch {
		case err != nil && ctx.Err() == nil:
			s.cfg.Logger.Warn("retention failed", slog.Any("error", err))
		case p != Pruned{}:
			s.cfg.Logger.Info("retention pruned",
				slog.Int64("idempotency_keys", p.IdempotencyKeys), slog.Int64("inbox_events", p.InboxEvents),
				slog.Int64("breaker_events", p.BreakerEvents), slog.Int64("replay_jobs", p.ReplayJobs))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
