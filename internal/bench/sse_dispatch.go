package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/switchyard/switchyard/internal/stats"
)

// sseDispatchWarmup is how many seconds of deliveries must have happened
// before the SSE bench commits its first change under dispatch load, so
// that the changes are timed under the steady load, not its start.
const sseDispatchWarmup = 0.5

// sseDispatchLoad is the delivery load `console bench sse --dispatch-rate`
// runs beside the live pipeline: `bench dispatch`'s offered-load mode (a
// traffic generator enqueuing each message in a transaction of its own,
// waking the dispatcher after each commit, and a dispatcher delivering to
// a noop destination), plus the statistics leader, in the same process as
// the SSE hub, as `console serve` runs them.
type sseDispatchLoad struct {
	run    *benchRun
	stats  *stats.Service
	cancel context.CancelFunc
	done   chan struct{}
	err    error // written before done is closed
}

// sseDispatchOptions are the offered-load options for rate messages per
// second over the whole event phase and a margin. The traffic generator
// shares the dispatcher's process, so it wakes it directly (--wake local,
// Dispatcher.Wake), as code that enqueues beside an embedded dispatcher
// does: 2,000 NOTIFY transactions a second through PostgreSQL, on top of
// the 2,000 enqueues, left this 2-core machine short of the offered rate
// (about 1,800 delivered a second), which is not the load the target
// names. The NOTIFY path is measured by bench dispatch --rate.
func sseDispatchOptions(rate int, events int, interval, timeout time.Duration) (benchOptions, error) {
	phase := time.Duration(events)*interval + 2*time.Second
	seconds := int(math.Ceil(phase.Seconds() + sseDispatchWarmup))
	return parseBenchOptions([]string{"--rate", fmt.Sprint(rate), "--seconds", fmt.Sprint(seconds), "--timeout", timeout.String(), "--wake", "local"})
}

// startSSEDispatchLoad starts the statistics leader, the dispatcher and the
// traffic generator, and returns once the first warm-up deliveries are
// done.
func startSSEDispatchLoad(ctx context.Context, target *benchTarget, opts benchOptions, logger *slog.Logger) (*sseDispatchLoad, error) {
	ctx, cancel := context.WithCancel(ctx)
	l := &sseDispatchLoad{cancel: cancel, done: make(chan struct{})}
	l.stats = stats.New(target.pool, stats.Config{Owner: "bench-sse", Logger: logger.With(slog.String("component", "stats"))})
	if err := l.stats.Start(ctx); err != nil {
		cancel()
		return nil, err
	}
	run, err := newBenchRun(ctx, target, opts, logger.With(slog.String("component", "dispatch")))
	if err != nil {
		cancel()
		l.stats.Stop()
		return nil, err
	}
	l.run = run
	go func() {
		defer close(l.done)
		_, l.err = run.offered(ctx)
	}()
	warm := int64(float64(opts.rate) * sseDispatchWarmup)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for l.delivered() < warm {
		select {
		case <-l.done:
			err := l.err
			l.close()
			return nil, fmt.Errorf("the dispatch load ended during its warm-up: %w", err)
		case <-ctx.Done():
			l.close()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	return l, nil
}

// delivered is how many messages the destination has accepted so far.
func (l *sseDispatchLoad) delivered() int64 { return l.run.recorder.accepted.Load() }

// wait lets the load finish (every offered message delivered, which the
// run checks with one count) and releases it.
func (l *sseDispatchLoad) wait() error {
	<-l.done
	l.close()
	if l.err != nil {
		return fmt.Errorf("dispatch load: %w", l.err)
	}
	return nil
}

// close ends the load wherever it is and releases it; it may be called
// more than once.
func (l *sseDispatchLoad) close() {
	l.cancel()
	<-l.done
	l.run.close()
	l.stats.Stop()
}
