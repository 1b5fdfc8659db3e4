package outbox

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/destination/guard"
	"github.com/switchyard/switchyard/internal/queries"
)

// heartbeatLoop keeps this dispatcher's row in switchyard.dispatchers fresh
// (heartbeat_at, leases_held), and what it knows of the claims' statistics
// (also when noteClaimed asks), until ctx ends. Start ran the first
// heartbeat.
func (d *Dispatcher) heartbeatLoop(ctx context.Context) {
	tick := time.NewTicker(d.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			d.heartbeat(ctx)
		case <-d.statisticsDue:
			readCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			d.readPlanStatistics(readCtx)
			cancel()
		}
	}
}

// heartbeat registers the dispatcher or refreshes its row, then reads the
// claims' statistics (readPlanStatistics). A failure is logged, not fatal:
// the row is for the console, leases do not depend on it.
func (d *Dispatcher) heartbeat(ctx context.Context) {
	host, _ := os.Hostname()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := queries.New(d.pool).DispatcherHeartbeat(ctx, queries.DispatcherHeartbeatParams{
		Owner: d.cfg.Owner, Host: host, Pid: int32(os.Getpid()),
		Workers: int32(d.cfg.Workers), LeasesHeld: int32(d.inFlight.Load()),
	})
	if err != nil {
		d.cfg.Logger.Warn("dispatcher heartbeat failed", slog.Any("error", err))
		return
	}
	d.readPlanStatistics(ctx)
}

// markStopped records that the dispatcher has stopped, after its workers
// have finished and released their leases.
func (d *Dispatcher) markStopped() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := queries.New(d.pool).DispatcherStopped(ctx, d.cfg.Owner); err != nil {
		d.cfg.Logger.Warn("mark dispatcher stopped failed", slog.Any("error", err))
	}
}

// BreakerRecorder returns a guard state-change callback that records each
// change in switchyard.breaker_events and the change feed for the console,
// as owner, then calls changed (if not nil; see Config.Changed). It never
// blocks the guard: the insert runs on its own goroutine with a timeout.
func BreakerRecorder(pool *pgxpool.Pool, owner string, logger *slog.Logger, changed func()) func(name string, from, to guard.State) {
	return func(name string, from, to guard.State) {
		at := time.Now()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := queries.New(pool).BreakerEventInsert(ctx, queries.BreakerEventInsertParams{
				Destination: name, Owner: owner, FromState: from.String(), ToState: to.String(), ChangedAt: at,
			})
			if err != nil {
				logger.Warn("record breaker change failed", slog.String("destination", name), slog.Any("error", err))
				return
			}
			if changed != nil {
				changed()
			}
		}()
	}
}
