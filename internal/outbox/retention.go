package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
)

// Retention says how long history is kept. Zero fields take the defaults.
type Retention struct {
	// Delivered messages (and their attempts) are deleted this long after
	// delivery, unless a replay points to them. Default 7 days. Dead
	// messages are never deleted by retention: an operator decides.
	Delivered time.Duration
	// Attempts of any message, and the hourly trend of dead-letter groups,
	// are deleted after this long. Default 30 days. The attempt that
	// delivered a message is kept on its row, and so lives as long as the
	// message (Delivered).
	Attempts time.Duration
	// Stats rows are deleted after this long. Default 2 days.
	Stats time.Duration
	// IdleAggregates: the bookkeeping row of an aggregate with nothing left
	// to deliver is deleted after this long. Default 10 minutes.
	IdleAggregates time.Duration
	// Dispatchers whose heartbeat is older are forgotten. Default 7 days.
	Dispatchers time.Duration
	// Interval between runs in a dispatcher. Default 1 minute.
	Interval time.Duration
}

func (r Retention) withDefaults() Retention {
	r.Delivered = defaultDuration(r.Delivered, 7*24*time.Hour)
	r.Attempts = defaultDuration(r.Attempts, 30*24*time.Hour)
	r.Stats = defaultDuration(r.Stats, 48*time.Hour)
	r.IdleAggregates = defaultDuration(r.IdleAggregates, 10*time.Minute)
	r.Dispatchers = defaultDuration(r.Dispatchers, 7*24*time.Hour)
	r.Interval = defaultDuration(r.Interval, time.Minute)
	return r
}

// pruneBatch bounds each delete so no statement holds locks for long.
const pruneBatch = 5000

// Pruned counts what one Prune deleted.
type Pruned struct {
	Delivered, Attempts, DeadLetterHours, IdleAggregates, Stats, Dispatchers int64
}

// Prune deletes history older than r's limits, measured back from now, in
// batches until none is left.
func Prune(ctx context.Context, pool *pgxpool.Pool, r Retention, now time.Time) (Pruned, error) {
	r = r.withDefaults()
	q := queries.New(pool)
	var p Pruned
	var err error
	if p.Delivered, err = drain(func() (int64, error) {
		return q.OutboxPruneDelivered(ctx, queries.OutboxPruneDeliveredParams{Cutoff: ptr(now.Add(-r.Delivered)), BatchSize: pruneBatch})
	}); err != nil {
		return p, fmt.Errorf("prune delivered messages: %w", err)
	}
	if p.Attempts, err = drain(func() (int64, error) {
		return q.OutboxAttemptPrune(ctx, queries.OutboxAttemptPruneParams{Cutoff: now.Add(-r.Attempts), BatchSize: pruneBatch})
	}); err != nil {
		return p, fmt.Errorf("prune attempts: %w", err)
	}
	if p.DeadLetterHours, err = q.DeadLetterHoursPrune(ctx, now.Add(-r.Attempts)); err != nil {
		return p, fmt.Errorf("prune dead-letter trend: %w", err)
	}
	if p.IdleAggregates, err = drain(func() (int64, error) {
		return q.OutboxAggregatePrune(ctx, queries.OutboxAggregatePruneParams{Cutoff: now.Add(-r.IdleAggregates), BatchSize: pruneBatch})
	}); err != nil {
		return p, fmt.Errorf("prune idle aggregates: %w", err)
	}
	if p.Stats, err = q.DeliveryStatsPrune(ctx, now.Add(-r.Stats)); err != nil {
		return p, fmt.Errorf("prune delivery stats: %w", err)
	}
	if p.Dispatchers, err = q.DispatcherPrune(ctx, now.Add(-r.Dispatchers)); err != nil {
		return p, fmt.Errorf("prune dispatchers: %w", err)
	}
	return p, nil
}

// drain repeats a batched delete until a batch comes back short.
func drain(batch func() (int64, error)) (int64, error) {
	var total int64
	for {
		n, err := batch()
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
}

func ptr[T any](v T) *T { return &v }

// retentionLoop prunes every Interval until ctx ends. Several dispatchers
// may prune at once: the deletes are idempotent.
func (d *Dispatcher) retentionLoop(ctx context.Context) {
	tick := time.NewTicker(d.cfg.Retention.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := Prune(ctx, d.pool, d.cfg.Retention, time.Now()); err != nil && ctx.Err() == nil {
			d.cfg.Logger.Warn("retention failed", "error", err)
		}
	}
}
