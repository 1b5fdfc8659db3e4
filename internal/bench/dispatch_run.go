package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/destination/guard"
	"github.com/switchyard/switchyard/internal/destination/registry"
	"github.com/switchyard/switchyard/internal/destination/webhook"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/pgtrace"
	"github.com/switchyard/switchyard/internal/queries"
)

// roundTripsMethod says, in the JSON line, how round_trips_per_message is
// counted.
const roundTripsMethod = "pgx QueryTracer and BatchTracer on the dispatcher's own pool and its claims' pool: statements sent on their own (claims including empty polls, " +
	"heartbeats, large finalizes, retention) and pipelines (small finalizes) per message; one round trip each once prepared"

// benchRun is the dispatcher side of one bench: the destination, wrapped
// to record every delivery, and a dispatcher on a pool of its own whose
// statements are counted.
type benchRun struct {
	opts       benchOptions
	target     *benchTarget
	logger     *slog.Logger
	recorder   *deliveryRecorder
	statements *pgtrace.RoundTrips
	pool       *pgxpool.Pool // the dispatcher's
	dispatcher *outbox.Dispatcher
	notifier   *outbox.Notifier     // offered-load mode's shared wake-up (--wake shared)
	webhook    *webhook.Destination // --destination http: the destination the route wraps
	receiver   *benchReceiver       // --destination http: where webhook sends
	closers    []func()             // run in reverse order by close
	// commits[i] is offered message i's enqueuing transaction, BEGIN to
	// COMMIT returned, begunAt[i] when it began and committedAt[i] when
	// COMMIT returned (offered-load mode only; each written once, by the
	// goroutine that enqueued it, and read after they have all ended).
	commits     durations
	begunAt     []time.Time
	committedAt []time.Time
}

// newBenchRun registers the bench's destination and builds (without
// starting) its dispatcher, with routes built the way the console builds
// them: the destination's guard, retry policy and timeout.
func newBenchRun(ctx context.Context, target *benchTarget, opts benchOptions, logger *slog.Logger) (*benchRun, error) {
	b := &benchRun{opts: opts, target: target, logger: logger,
		recorder: newDeliveryRecorder(opts.messages), statements: &pgtrace.RoundTrips{}, notifier: outbox.NewNotifier(target.pool, opts.wakeCooldown)}
	if opts.rate > 0 {
		b.commits, b.begunAt, b.committedAt = make(durations, opts.messages), make([]time.Time, opts.messages), make([]time.Time, opts.messages)
		b.recorder.deliveredAt = make([]atomic.Int64, opts.messages)
	}
	if err := b.build(ctx); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *benchRun) build(ctx context.Context) error {
	route, err := b.route(ctx)
	if err != nil {
		return err
	}
	poolCfg := b.target.config.Copy()
	poolCfg.ConnConfig.Tracer = b.statements
	poolCfg.ConnConfig.RuntimeParams["application_name"] = dispatcherApplication
	poolCfg.MaxConns = int32(2*b.opts.workers + 4) // a worker's claim and its finalize, and some for the statistics and retention
	if b.pool, err = pgxpool.NewWithConfig(ctx, poolCfg); err != nil {
		return fmt.Errorf("open the dispatcher's pool: %w", err)
	}
	b.closers = append(b.closers, b.pool.Close)
	b.dispatcher = outbox.New(b.pool, outbox.Config{
		Owner: b.target.owner(), Workers: b.opts.workers, BatchSize: b.opts.batch, AggregateBatch: b.opts.perAggregate,
		Routes:       map[string]outbox.Route{b.target.destinationName(): route},
		Logger:       b.logger.With(slog.String("component", "dispatcher")),
		WakeCooldown: b.opts.wakeCooldown,
	})
	b.closers = append(b.closers, b.dispatcher.Stop)
	return nil
}

// route starts the destination (for http, the local receiver too),
// registers it in switchyard.destinations and returns its route.
func (b *benchRun) route(ctx context.Context) (outbox.Route, error) {
	row := benchDestinationRow(b.target.destinationName(), b.opts.concurrency)
	var dest destination.Destination = destination.Func(func(context.Context, destination.Delivery) (destination.Outcome, error) {
		return destination.Outcome{}, nil
	})
	if b.opts.destination == "http" {
		secret, err := newWebhookSecret()
		if err != nil {
			return outbox.Route{}, err
		}
		receiver, err := startBenchReceiver(secret, b.logger)
		if err != nil {
			return outbox.Route{}, err
		}
		b.closers = append(b.closers, receiver.close)
		b.receiver = receiver
		row.Address = receiver.url
		wh, err := webhook.New(webhook.Config{
			URL: receiver.url, Secret: secret, Timeout: time.Duration(row.TimeoutMs) * time.Millisecond,
			Connections: int(row.Concurrency),
		})
		if err != nil {
			return outbox.Route{}, fmt.Errorf("webhook destination: %w", err)
		}
		b.closers = append(b.closers, wh.CloseIdleConnections)
		dest, b.webhook = wh, wh
	}
	if err := upsertBenchDestination(ctx, b.target.pool, row); err != nil {
		return outbox.Route{}, err
	}
	route, err := registry.Route(row, b.recorder.wrap(dest), func(name string, from, to guard.State) {
		b.logger.Warn("circuit breaker changed state", slog.String("destination", name), slog.String("from", from.String()), slog.String("to", to.String()))
	})
	if err != nil {
		return outbox.Route{}, err
	}
	return route, nil
}

// close stops the dispatcher and releases what the run started.
func (b *benchRun) close() {
	for _, c := range slices.Backward(b.closers) {
		c()
	}
	b.closers = nil
}

// benchDestinationRow is a destination with the destinations table's
// defaults (migrations/00002_destinations.sql) but of kind function: only a
// process that embeds the dispatcher delivers to a function destination,
// so no other dispatcher on the same database claims the bench's messages.
// The http bench records its receiver's URL as the address.
func benchDestinationRow(name string, concurrency int) queries.SwitchyardDestination {
	return queries.SwitchyardDestination{
		Name: name, Kind: "function", RetryBaseMs: 1000, RetryCapMs: 600000, MaxAttempts: 12,
		TimeoutMs: 10000, Burst: 1, Concurrency: int32(concurrency),
		BreakerFailureRatio: 0.5, BreakerMinRequests: 10, BreakerOpenMs: 30000,
	}
}

func upsertBenchDestination(ctx context.Context, pool *pgxpool.Pool, row queries.SwitchyardDestination) error {
	err := queries.New(pool).DestinationUpsert(ctx, queries.DestinationUpsertParams{
		Name: row.Name, Kind: row.Kind, Address: row.Address, SecretRef: row.SecretRef,
		RetryBaseMs: row.RetryBaseMs, RetryCapMs: row.RetryCapMs, MaxAttempts: row.MaxAttempts,
		TimeoutMs: row.TimeoutMs, RatePerSecond: row.RatePerSecond, Burst: row.Burst, Concurrency: row.Concurrency,
		BreakerFailureRatio: row.BreakerFailureRatio, BreakerMinRequests: row.BreakerMinRequests, BreakerOpenMs: row.BreakerOpenMs,
	})
	if err != nil {
		return fmt.Errorf("register the bench destination: %w", err)
	}
	return nil
}

// deliveryRecorder counts the deliveries the destination accepted and
// keeps each one's enqueue-to-delivered time: now minus the message's
// created_at (the server's now() in the enqueuing transaction).
type deliveryRecorder struct {
	accepted atomic.Int64
	// samples[i] is written by the (i+1)th accepted delivery; read only
	// after the dispatcher has stopped (Stop waits for every delivery).
	samples []time.Duration
	all     chan struct{} // closed when accepted reaches len(samples)
	failed  atomic.Int64
	failure chan error // receives the first failed delivery's error
	// deliveredAt[i], offered-load mode only, is when offered message i
	// (its id says which: offeredMessageID) was first accepted, in Unix
	// nanoseconds.
	deliveredAt []atomic.Int64
}

func newDeliveryRecorder(expected int) *deliveryRecorder {
	return &deliveryRecorder{samples: make([]time.Duration, expected), all: make(chan struct{}), failure: make(chan error, 1)}
}

// wrap returns inner, recording each delivery's outcome.
func (r *deliveryRecorder) wrap(inner destination.Destination) destination.Destination {
	return destination.Func(func(ctx context.Context, d destination.Delivery) (destination.Outcome, error) {
		out, err := inner.Deliver(ctx, d)
		if err != nil {
			if r.failed.Add(1) == 1 {
				r.failure <- err
			}
			return out, err
		}
		latency := time.Since(d.EnqueuedAt)
		if r.deliveredAt != nil {
			if n, ok := offeredIndex(d.MessageID); ok && n < len(r.deliveredAt) {
				r.deliveredAt[n].CompareAndSwap(0, time.Now().UnixNano())
			}
		}
		i := r.accepted.Add(1)
		if i <= int64(len(r.samples)) {
			r.samples[i-1] = latency
		}
		if i == int64(len(r.samples)) {
			close(r.all)
		}
		return out, nil
	})
}

// deliveredSince returns, in ascending order, the time from at[i] to
// offered message i's first delivery, for i from first to end-1: from its
// COMMIT returning (committedAt), issue 17's "enqueue-commit to
// delivered", or from its BEGIN. A delivery can come before the enqueuer
// has read its COMMIT's answer; it counts as 0. Call it only after the
// dispatcher has stopped and every enqueue has ended.
func (r *deliveryRecorder) deliveredSince(at []time.Time, first, end int) durations {
	out := make(durations, 0, end-first)
	r.eachDelivered(at, first, end, func(_ int, d time.Duration) { out = append(out, d) })
	slices.Sort(out)
	return out
}

// eachDelivered calls f, in order of i, with each offered message i from
// first to end-1 that was delivered and the time from at[i] to its first
// delivery (0 if the delivery came first; see deliveredSince).
func (r *deliveryRecorder) eachDelivered(at []time.Time, first, end int, f func(i int, d time.Duration)) {
	for i := first; i < end; i++ {
		if delivered := r.deliveredAt[i].Load(); delivered != 0 && !at[i].IsZero() {
			f(i, max(time.Unix(0, delivered).Sub(at[i]), 0))
		}
	}
}

// offeredMessageID is offered message i's id: a new version 7 UUID whose
// last four bytes are i, so that its delivery says which message it is.
func offeredMessageID(i int) (uuid.UUID, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.Nil, err
	}
	binary.BigEndian.PutUint32(id[12:], uint32(i))
	return id, nil
}

// offeredIndex reads i back from offeredMessageID(i), as a delivery
// carries it (MessageID).
func offeredIndex(messageID string) (int, bool) {
	id, err := uuid.Parse(messageID)
	if err != nil {
		return 0, false
	}
	return int(binary.BigEndian.Uint32(id[12:])), true
}

// sorted returns the recorded latencies in ascending order. Call it only
// after the dispatcher has stopped.
func (r *deliveryRecorder) sorted() durations {
	n := min(r.accepted.Load(), int64(len(r.samples)))
	s := slices.Clone(r.samples[:n])
	slices.Sort(s)
	return s
}

// durations is a sorted list of latencies.
type durations []time.Duration

// percentile returns the nearest-rank q-quantile (q in [0, 1]); 0 when
// empty.
func (d durations) percentile(q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[max(0, min(i, len(d)-1))]
}

func benchRound(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}

func benchMillis(d time.Duration) float64 {
	return benchRound(float64(d)/float64(time.Millisecond), 2)
}
