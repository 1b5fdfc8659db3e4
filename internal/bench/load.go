package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/pgwarm"
)

// benchSeedBatch is how many messages one seeding transaction enqueues (by
// COPY: Enqueue copies batches of 64 or more).
const benchSeedBatch = 5000

// benchFinalizeWait bounds the wait, after the destination has accepted
// every message, for the dispatcher to record the last of them delivered.
const benchFinalizeWait = time.Minute

// benchMeasurement is what one measured phase observed.
type benchMeasurement struct {
	messages     int           // measured (offered-load mode: after the warm-up)
	elapsed      time.Duration // the measured phase
	seed         time.Duration // drain mode: seeding, before the measured phase
	retainedSeed time.Duration // seeding the history (--retained), before the measured phase
	firstID      int64         // the id after which the measured messages are
	enqueueing   time.Duration // offered-load mode: from when the first timed message was due to the last commit
	statements   int64         // sent by the dispatcher during the measured phase
	latency      durations
	commits      durations // offered-load mode: each enqueuing transaction, BEGIN to COMMIT returned
	sinceCommit  durations // offered-load mode: each message's COMMIT returned to its delivery
	// offered-load mode: the windows (stallWindow) that hold the timed
	// messages at or over sinceCommit's p99
	commitP99Windows int
	// offered-load mode: sinceCommit of the warm-up's messages
	warmupSinceCommit durations
	cpu               benchCPU // CPU per message over the measured phase (offered load: the enqueues' too)
	// the costliest statements over the measured phase, where the server
	// has pg_stat_statements
	serverStatements []serverStatement
	// drain mode: the tables and indexes whose buffers the measured phase
	// touched most
	serverRelations []serverRelation
}

// drain seeds the messages, then times the dispatcher from its start until
// no message is pending.
func (b *benchRun) drain(ctx context.Context) (benchMeasurement, error) {
	m := benchMeasurement{messages: b.opts.messages}
	if err := b.retain(ctx, &m); err != nil {
		return m, err
	}
	start := time.Now()
	if err := b.seed(ctx); err != nil {
		return m, err
	}
	m.seed = time.Since(start)
	b.logger.Info("seeded; draining", slog.Int("messages", m.messages), slog.Int("aggregates", b.opts.aggregates),
		slog.Duration("seed_time", m.seed.Round(time.Millisecond)))
	b.target.pool.Reset() // the seed's backends exit: their counters are in the first sample
	relationsAtStart, err := sampleRelations(ctx, b.target.pool, benchApplication, relationsQuiesceWait, b.logger)
	if err != nil {
		return m, err
	}
	meter, err := b.startMeter(ctx)
	if err != nil {
		return m, err
	}
	defer meter.close()
	start = time.Now()
	if err := b.dispatcher.Start(ctx); err != nil {
		return m, fmt.Errorf("start the dispatcher: %w", err)
	}
	if err := b.waitDelivered(ctx, start, nil); err != nil {
		return m, err
	}
	m.elapsed, m.statements = time.Since(start), b.statements.Total()
	if m.cpu, m.serverStatements, err = meter.stop(ctx, m.messages); err != nil {
		return m, err
	}
	b.dispatcher.Stop()
	b.pool.Close() // the dispatcher's backends exit: their counters are in the last sample
	relationsAtEnd, err := sampleRelations(ctx, b.target.pool, dispatcherApplication, relationsQuiesceWait, b.logger)
	if err != nil {
		return m, err
	}
	m.serverRelations = relationsSince(relationsAtStart, relationsAtEnd)
	if m, err = b.finish(ctx, m); err != nil {
		return m, err
	}
	m.latency = b.recorder.sorted()
	return m, nil
}

// retain seeds the retained history (--retained, --retained-dead), if
// asked for, before the measured messages: into m go how long it took and
// the id after which the measured messages are. A database copied from a
// template (--retained-template) holds the history already: its seeding,
// if this run made the template, and the copy are what it took.
func (b *benchRun) retain(ctx context.Context, m *benchMeasurement) error {
	if b.opts.retained+b.opts.retainedDead == 0 {
		return nil
	}
	var err error
	if b.target.template.name != "" {
		m.retainedSeed = b.target.template.seeded + b.target.copied
		m.firstID, err = lastRetainedID(ctx, b.target.pool)
		return err
	}
	start := time.Now()
	if m.firstID, err = seedRetained(ctx, b.target, b.opts, b.logger); err != nil {
		return err
	}
	m.retainedSeed = time.Since(start)
	return nil
}

// seed enqueues the messages in transactions of benchSeedBatch, then
// refreshes the planner's statistics, as autovacuum would have by the time
// a real backlog of this size is drained.
func (b *benchRun) seed(ctx context.Context) error {
	dest := b.target.destinationName()
	for first := 0; first < b.opts.messages; first += benchSeedBatch {
		msgs := make([]outbox.Message, min(benchSeedBatch, b.opts.messages-first))
		for i := range msgs {
			msgs[i] = benchMessage(dest, first+i, b.opts.aggregates)
		}
		err := pgx.BeginFunc(ctx, b.target.pool, func(tx pgx.Tx) error {
			_, err := outbox.Enqueue(ctx, tx, msgs...)
			return err
		})
		if err != nil {
			return fmt.Errorf("seed messages %d to %d: %w", first, first+len(msgs)-1, err)
		}
	}
	if _, err := b.target.pool.Exec(ctx, `ANALYZE switchyard.outbox`); err != nil {
		return fmt.Errorf("analyze the seeded outbox: %w", err)
	}
	return nil
}

// benchMessage is the i-th message: a small JSON payload, in aggregate
// i mod aggregates (none when aggregates is 0).
func benchMessage(dest string, i, aggregates int) outbox.Message {
	m := outbox.Message{
		Topic: "bench.order.updated", Destination: dest,
		Payload: fmt.Appendf(nil, `{"seq":%d,"status":"paid","amount_cents":12990,"currency":"EUR"}`, i),
	}
	if aggregates > 0 {
		m.AggregateType, m.AggregateID = "order", strconv.Itoa(i%aggregates)
	}
	return m
}

// offered enqueues at the offered rate while the dispatcher runs, and
// times from the first timed enqueue until every message is delivered.
// With a warm-up (--warmup-seconds) the same load runs first, without a
// pause, and its messages are left out of every figure but
// warmupSinceCommit.
func (b *benchRun) offered(ctx context.Context) (benchMeasurement, error) {
	warmup := b.opts.warmupMessages()
	m := benchMeasurement{messages: b.opts.messages - warmup}
	if err := b.retain(ctx, &m); err != nil {
		return m, err
	}
	// The enqueuers' connections are a service's, open long before its
	// messages: made during the timed phase, they were part of what it
	// timed (tools/peers opens River's enqueuers' the same way).
	if err := pgwarm.Open(ctx, b.target.pool, b.opts.enqueuers); err != nil {
		return m, fmt.Errorf("open the enqueuers' connections: %w", err)
	}
	if err := b.dispatcher.Start(ctx); err != nil {
		return m, fmt.Errorf("start the dispatcher: %w", err)
	}
	if err := b.offerAndWait(ctx, &m); err != nil {
		return m, err
	}
	m, err := b.finish(ctx, m)
	if err != nil {
		return m, err
	}
	m.commits = slices.Sorted(slices.Values(b.commits[warmup:]))
	// From the client's BEGIN, as tools/peers times River's jobs
	// (begin_p99_ms): one clock for both sides.
	m.latency = b.recorder.deliveredSince(b.begunAt, warmup, len(b.begunAt))
	m.sinceCommit = b.recorder.deliveredSince(b.committedAt, warmup, len(b.committedAt))
	timed := b.recorder.committedLatencies(b.committedAt, warmup, len(b.committedAt))
	m.commitP99Windows = slowWindows(timed, m.sinceCommit.percentile(0.99), stallWindow)
	if b.opts.latencyOut != "" {
		if err := writeLatencies(b.opts.latencyOut, timed); err != nil {
			return m, err
		}
	}
	m.warmupSinceCommit = b.recorder.deliveredSince(b.committedAt, 0, warmup)
	return m, nil
}

// offerAndWait offers every message, the warm-up's first, and waits until
// all are delivered. Into m go the timed phase's figures: its time, the
// statements the dispatcher sent and the CPU, from when its first message
// was due, and how long its messages took to enqueue.
func (b *benchRun) offerAndWait(ctx context.Context, m *benchMeasurement) error {
	offerCtx, cancel := context.WithCancel(ctx)
	b.logger.Info("offering load", slog.Int("per_sec", b.opts.rate), slog.Int("warmup_seconds", b.opts.warmup),
		slog.Int("seconds", b.opts.seconds), slog.String("wake", b.opts.wake))
	start := time.Now()
	timedFrom := start.Add(time.Duration(b.opts.warmup) * time.Second)
	failed := make(chan error, 1)
	done := make(chan struct{})
	var took time.Duration // written before done is closed
	go func() {
		defer close(done)
		if err := b.offer(offerCtx, start); err != nil {
			failed <- err
		}
		took = time.Since(start)
	}()
	// No enqueuer outlives this call, whatever way it returns.
	stopOffering := sync.OnceFunc(func() { cancel(); <-done })
	defer stopOffering()
	meter, statementsBefore, err := b.startMeterAt(ctx, timedFrom, done)
	if err != nil {
		return err
	}
	defer meter.close()
	err = b.waitDelivered(ctx, start, failed)
	m.elapsed, m.statements = time.Since(timedFrom), b.statements.Total()-statementsBefore
	stopOffering()
	if err != nil {
		return err
	}
	m.enqueueing = took - timedFrom.Sub(start)
	m.cpu, m.serverStatements, err = meter.stop(ctx, m.messages)
	return err
}

// startMeterAt waits until at (the timed phase's start), or until the
// offer ended early (an enqueue failed: waitDelivered reports it), then
// starts the CPU meter and reads how many statements the dispatcher has
// sent so far.
func (b *benchRun) startMeterAt(ctx context.Context, at time.Time, offerDone <-chan struct{}) (*cpuMeter, int64, error) {
	if wait := time.Until(at); wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-offerDone:
		case <-timer.C:
		}
	}
	statements := b.statements.Total()
	meter, err := b.startMeter(ctx)
	return meter, statements, err
}

// offer enqueues message i, each in a transaction of its own, at
// start + i/rate, on opts.enqueuers connections. When all of them are busy
// the schedule slips; enqueued_per_sec shows it.
func (b *benchRun) offer(ctx context.Context, start time.Time) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int, b.opts.enqueuers)
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error // set once, read after wg.Wait
	)
	for range b.opts.enqueuers {
		wg.Go(func() {
			for i := range jobs {
				if err := b.enqueueOne(ctx, i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
				}
			}
		})
	}
	err := b.pace(ctx, start, jobs)
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return err
}

// pace hands out message numbers on schedule.
func (b *benchRun) pace(ctx context.Context, start time.Time, jobs chan<- int) error {
	for i := range b.opts.messages {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(b.opts.rate))
		if wait := time.Until(due); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return ctx.Err()
			case <-timer.C:
			}
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// enqueueOne commits message i in a transaction of its own, then wakes
// the dispatcher as --wake says: through PostgreSQL (outbox.Notify, after
// the commit, as a service in another process would; or a NOTIFY shared
// with the enqueues committing meanwhile, outbox.Notifier), in-process, or
// not.
func (b *benchRun) enqueueOne(ctx context.Context, i int) error {
	msg := benchMessage(b.target.destinationName(), i, b.opts.aggregates)
	var err error
	if msg.ID, err = offeredMessageID(i); err != nil {
		return err
	}
	begin := time.Now()
	b.begunAt[i] = begin
	err = pgx.BeginFunc(ctx, b.target.pool, func(tx pgx.Tx) error {
		_, err := outbox.Enqueue(ctx, tx, msg)
		return err
	})
	if err != nil {
		return fmt.Errorf("enqueue message %d: %w", i, err)
	}
	b.committedAt[i] = time.Now()
	b.commits[i] = b.committedAt[i].Sub(begin)
	switch b.opts.wake {
	case "notify":
		if err := outbox.Notify(ctx, b.target.pool); err != nil {
			return fmt.Errorf("notify after message %d: %w", i, err)
		}
	case "shared":
		if err := b.notifier.Notify(ctx); err != nil {
			return fmt.Errorf("notify after message %d: %w", i, err)
		}
	case "local":
		b.dispatcher.Wake()
	}
	return nil
}

// waitDelivered waits until the destination has accepted every message and
// the dispatcher has recorded them all delivered. It fails at the first
// failed delivery (a bench counts only clean runs), on abort, or after
// opts.timeout; it logs progress every few seconds.
func (b *benchRun) waitDelivered(ctx context.Context, start time.Time, abort <-chan error) error {
	progress := time.NewTicker(2 * time.Second)
	defer progress.Stop()
	deadline := time.NewTimer(b.opts.timeout)
	defer deadline.Stop()
	for {
		select {
		case <-b.recorder.all:
			return b.waitFinalized(ctx)
		case err := <-b.recorder.failure:
			return fmt.Errorf("a delivery failed, and a bench counts only clean runs: %w", err)
		case err := <-abort:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("timed out after %s with %d of %d messages delivered", b.opts.timeout, b.recorder.accepted.Load(), b.opts.messages)
		case <-progress.C:
			n := b.recorder.accepted.Load()
			b.logger.Info("dispatching", slog.Int64("delivered", n), slog.Int("of", b.opts.messages),
				slog.Int("per_sec", int(float64(n)/time.Since(start).Seconds())))
		}
	}
}

// waitFinalized polls until no bench message is pending: the destination
// has accepted each, but the last batches may still be finalizing. The two
// EXISTS match the outbox's two partial indexes on pending rows.
func (b *benchRun) waitFinalized(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, benchFinalizeWait)
	defer cancel()
	for {
		var pending bool
		err := b.target.pool.QueryRow(ctx, `SELECT
			EXISTS (SELECT 1 FROM switchyard.outbox WHERE state = 'pending' AND aggregate_id = '' AND destination = $1)
			OR EXISTS (SELECT 1 FROM switchyard.outbox WHERE state = 'pending' AND aggregate_id <> '' AND destination = $1)`,
			b.target.destinationName()).Scan(&pending)
		if err != nil {
			return fmt.Errorf("wait for the last messages to be finalized: %w", err)
		}
		if !pending {
			return nil
		}
		timer := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("wait for the last messages to be finalized: %w", ctx.Err())
		case <-timer.C:
		}
	}
}

// finish stops the dispatcher and confirms with one count that every
// message enqueued after the retained history ended delivered.
func (b *benchRun) finish(ctx context.Context, m benchMeasurement) (benchMeasurement, error) {
	b.dispatcher.Stop()
	var delivered, other int
	err := b.target.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'delivered'), count(*) FILTER (WHERE state <> 'delivered')
		FROM switchyard.outbox WHERE destination = $1 AND id > $2`, b.target.destinationName(), m.firstID).Scan(&delivered, &other)
	if err != nil {
		return m, fmt.Errorf("count delivered messages: %w", err)
	}
	// Every message enqueued, the warm-up's too.
	if delivered != b.opts.messages || other != 0 {
		return m, fmt.Errorf("%d of %d messages delivered, %d not", delivered, b.opts.messages, other)
	}
	b.logger.Info("done", slog.Int("messages", m.messages), slog.Duration("elapsed", m.elapsed.Round(time.Millisecond)),
		slog.Int("per_sec", int(float64(m.messages)/m.elapsed.Seconds())))
	return m, nil
}

// cpuMeter measures the CPU of a measured phase: a Go CPU profile if one
// was asked for (--cpuprofile), and the CPU samples at its start and end;
// and, where the server has pg_stat_statements, each statement's share.
type cpuMeter struct {
	target          *benchTarget
	start           cpuSample
	startStatements statementSample
	stopProfile     func() error
}

// startMeter starts the profile, if asked for, and takes the first samples.
func (b *benchRun) startMeter(ctx context.Context) (*cpuMeter, error) {
	stopProfile, err := startCPUProfile(b.opts.cpuProfile)
	if err != nil {
		return nil, err
	}
	c := &cpuMeter{target: b.target, stopProfile: stopProfile}
	if c.startStatements, err = sampleStatements(ctx, b.target.admin, b.target.name, false); err == nil {
		c.start, err = sampleCPU(ctx, b.target.pool)
	}
	if err != nil {
		_ = stopProfile()
		return nil, err
	}
	return c, nil
}

// stop takes the last samples and stops the profile: the CPU since the
// start, per 1,000 of messages, and what each statement cost meanwhile.
func (c *cpuMeter) stop(ctx context.Context, messages int) (benchCPU, []serverStatement, error) {
	end, err := sampleCPU(ctx, c.target.pool)
	if err != nil {
		return benchCPU{}, nil, err
	}
	endStatements, err := sampleStatements(ctx, c.target.admin, c.target.name, true)
	if err != nil {
		return benchCPU{}, nil, err
	}
	if err := c.stopProfile(); err != nil {
		return benchCPU{}, nil, err
	}
	return cpuSince(c.start, end, messages), statementsSince(c.startStatements, endStatements), nil
}

// close stops the profile if stop was not reached (a failed phase).
func (c *cpuMeter) close() { _ = c.stopProfile() }

// startCPUProfile writes a Go CPU profile to path until stop is called
// (stop may be called again; later calls do nothing). An empty path
// profiles nothing.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create the CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("start the CPU profile: %w", err)
	}
	return sync.OnceValue(func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("write the CPU profile: %w", err)
		}
		return nil
	}), nil
}
