package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is the job River drains: it carries a payload of about the
// size of the console bench's messages (~70 bytes of JSON).
type noopArgs struct {
	Seq     int    `json:"seq"`
	Payload string `json:"payload"`
}

func (noopArgs) Kind() string { return "peers_noop" }

// noopWorker does nothing but count; done is closed at want.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	worked *atomic.Int64
	want   int64
	done   chan struct{}
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	if w.worked.Add(1) == w.want {
		close(w.done)
	}
	return nil
}

// riverTarget is River's database: one of its own on the server, migrated
// once, emptied before each drain.
type riverTarget struct {
	admin *pgxpool.Pool // the configured database, to drop ours at the end
	pool  *pgxpool.Pool // River's database
	// inserts are the enqueuers' own connections to it (offered load
	// only), apart from the client's pool as a service's would be.
	inserts *pgxpool.Pool
	name    string
	logger  *slog.Logger
}

// openRiverTarget creates and migrates River's database; its client's
// pool has conns connections, and with insertConns > 0 the enqueuers get a
// pool of that many.
func openRiverTarget(ctx context.Context, admin *pgxpool.Pool, dsn string, conns, insertConns int) (*riverTarget, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	t := &riverTarget{admin: admin, name: "river_peers_" + hex.EncodeToString(b),
		logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{t.name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create River's database (the role needs CREATEDB): %w", err)
	}
	riverDSN, err := withDatabase(dsn, t.name)
	if err == nil {
		t.pool, err = connect(ctx, riverDSN, int32(conns))
	}
	if err == nil && insertConns > 0 {
		t.inserts, err = connect(ctx, riverDSN, int32(insertConns))
	}
	if err != nil {
		t.close()
		return nil, err
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(t.pool), &rivermigrate.Config{Logger: t.logger})
	if err == nil {
		_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		t.close()
		return nil, fmt.Errorf("migrate River: %w", err)
	}
	return t, nil
}

// close drops River's database.
func (t *riverTarget) close() {
	if t.pool != nil {
		t.pool.Close()
	}
	if t.inserts != nil {
		t.inserts.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := t.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{t.name}.Sanitize()+" WITH (FORCE)"); err != nil {
		fmt.Fprintln(os.Stderr, "peers: drop River's database:", err)
	}
}

// drain inserts n jobs (untimed) and times a fresh client with maxWorkers,
// fetching at most once per cooldown, until every job has been worked and
// is completed in the table. Once the client has stopped it empties
// river_job, untimed: otherwise autovacuum cleans up the completed jobs
// during the round's next drain, and with the rounds rotating one list
// that is always the same configuration (Switchyard's ordered drain, after
// River at 1,000 workers).
func (t *riverTarget) drain(ctx context.Context, n, maxWorkers int, cooldown time.Duration) (_ runResult, err error) {
	worker := &noopWorker{worked: &atomic.Int64{}, want: int64(n), done: make(chan struct{})}
	client, err := t.freshClient(ctx, worker, maxWorkers, cooldown)
	if err != nil {
		return runResult{}, err
	}
	defer func() { // deferred before stop below, so it runs after it
		emptyCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, terr := t.pool.Exec(emptyCtx, "TRUNCATE river_job"); terr != nil && err == nil {
			err = fmt.Errorf("empty river_job after the drain: %w", terr)
		}
	}()
	const batch = 5_000
	params := make([]river.InsertManyParams, 0, batch)
	for i := range n {
		params = append(params, river.InsertManyParams{Args: noopArgs{Seq: i, Payload: "order-placed:0123456789abcdef0123456789"}})
		if len(params) == batch || i == n-1 {
			if _, err := client.InsertManyFast(ctx, params); err != nil {
				return runResult{}, fmt.Errorf("insert jobs: %w", err)
			}
			params = params[:0]
		}
	}
	if _, err := t.pool.Exec(ctx, "ANALYZE river_job"); err != nil {
		return runResult{}, fmt.Errorf("analyze: %w", err)
	}

	cpuStart, err := sampleCPU(ctx, t.pool)
	if err != nil {
		return runResult{}, err
	}
	start := time.Now()
	stop, err := startClient(ctx, client)
	if err != nil {
		return runResult{}, err
	}
	defer stop()
	select {
	case <-worker.done:
	case <-ctx.Done():
		return runResult{}, ctx.Err()
	}
	// River completes jobs in batches after they are worked: the drain ends
	// when the table says so.
	for {
		var left int
		if err := t.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state <> 'completed'").Scan(&left); err != nil {
			return runResult{}, fmt.Errorf("count uncompleted jobs: %w", err)
		}
		if left == 0 {
			break
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return runResult{}, ctx.Err()
		}
	}
	elapsed := time.Since(start)
	cpuEnd, err := sampleCPU(ctx, t.pool)
	if err != nil {
		return runResult{}, err
	}
	var completed int
	if err := t.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&completed); err != nil {
		return runResult{}, fmt.Errorf("count completed jobs: %w", err)
	}
	if completed != n || worker.worked.Load() != int64(n) {
		return runResult{}, fmt.Errorf("%d jobs completed and %d worked, want %d each", completed, worker.worked.Load(), n)
	}
	cpu, err := json.Marshal(cpuSince(cpuStart, cpuEnd, n))
	if err != nil {
		return runResult{}, err
	}
	return runResult{MessagesPerSec: float64(int64(float64(n)/elapsed.Seconds() + 0.5)),
		Seconds: round3(elapsed.Seconds()), CPU: cpu}, nil
}

// timedSample is the CPU sample taken when a timed phase began.
type timedSample struct {
	sample cpuSample
	err    error
}

// sampleCPUAt samples the CPU at time at (the timed phase's start, the
// warm-up's inserts running meanwhile) and sends the sample on the channel
// it returns.
func (t *riverTarget) sampleCPUAt(ctx context.Context, at time.Time) <-chan timedSample {
	out := make(chan timedSample, 1)
	go func() {
		timer := time.NewTimer(time.Until(at))
		defer timer.Stop()
		select {
		case <-ctx.Done():
			out <- timedSample{err: ctx.Err()}
			return
		case <-timer.C:
		}
		s, err := sampleCPU(ctx, t.pool)
		out <- timedSample{sample: s, err: err}
	}()
	return out
}

// freshClient empties river_job and makes a client (not started) whose one
// queue runs worker on maxWorkers goroutines, fetching at most once per
// cooldown (0: River's default FetchCooldown), and polling at the larger of
// it and River's default FetchPollInterval.
func (t *riverTarget) freshClient(ctx context.Context, worker river.Worker[noopArgs], maxWorkers int, cooldown time.Duration) (*river.Client[pgx.Tx], error) {
	if _, err := t.pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return nil, fmt.Errorf("empty river_job: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, worker)
	client, err := river.NewClient(riverpgxv5.New(t.pool), &river.Config{
		Logger:            t.logger,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers:           workers,
		FetchCooldown:     cooldown,
		FetchPollInterval: max(cooldown, river.FetchPollIntervalDefault),
	})
	if err != nil {
		return nil, fmt.Errorf("new River client: %w", err)
	}
	return client, nil
}

// startClient starts client; stop stops it, giving its jobs in flight up
// to 30 seconds.
func startClient(ctx context.Context, client *river.Client[pgx.Tx]) (stop func(), err error) {
	if err := client.Start(ctx); err != nil {
		return nil, fmt.Errorf("start River: %w", err)
	}
	return func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	}, nil
}

// riverVersion is the River module this binary was built with.
func riverVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "github.com/riverqueue/river" {
				return m.Version
			}
		}
	}
	return "unknown"
}

// latencyWorker records when each job's work starts: workedAt[seq], Unix
// nanoseconds, the first time only. warmed is closed when the warm-up job
// (seq warmUp) has started, done when want distinct jobs have.
type latencyWorker struct {
	river.WorkerDefaults[noopArgs]
	workedAt []atomic.Int64
	worked   atomic.Int64
	want     int64
	warmUp   int
	warmed   chan struct{}
	done     chan struct{}
}

func (w *latencyWorker) Work(_ context.Context, job *river.Job[noopArgs]) error {
	if !w.workedAt[job.Args.Seq].CompareAndSwap(0, time.Now().UnixNano()) {
		return nil
	}
	if job.Args.Seq == w.warmUp {
		close(w.warmed)
	}
	if w.worked.Add(1) == w.want {
		close(w.done)
	}
	return nil
}

// offered measures River under offered load, as `console bench dispatch
// --rate` measures Switchyard: a fresh client (one queue of maxWorkers,
// the given FetchCooldown) runs while rate × (warmup + seconds) jobs are
// inserted, job i at start + i/rate, each with InsertTx in a transaction
// of its own on one of enqueuers connections; each job's latency runs from
// its COMMIT returning to its worker starting (0 if the work started
// first), and from its transaction's start. The first rate × warmup jobs
// are a warm-up, left out of every figure but WarmupP99Ms. Before them
// River is warmed with one job inserted and worked, untimed.
func (t *riverTarget) offered(ctx context.Context, rate, warmup, seconds, enqueuers, maxWorkers int, cooldown time.Duration) (latencyRun, error) {
	warmupJobs, n := rate*warmup, rate*seconds
	total := warmupJobs + n
	// Slot total is the one job that warms the client, before the warm-up phase.
	worker := &latencyWorker{workedAt: make([]atomic.Int64, total+1), want: int64(total + 1), warmUp: total,
		warmed: make(chan struct{}), done: make(chan struct{})}
	client, err := t.freshClient(ctx, worker, maxWorkers, cooldown)
	if err != nil {
		return latencyRun{}, err
	}
	stop, err := startClient(ctx, client)
	if err != nil {
		return latencyRun{}, err
	}
	defer stop()
	if _, err := client.Insert(ctx, noopArgs{Seq: total, Payload: "warm-up"}, nil); err != nil {
		return latencyRun{}, fmt.Errorf("insert the warm-up job: %w", err)
	}
	select {
	case <-worker.warmed:
	case <-time.After(30 * time.Second):
		return latencyRun{}, errors.New("the warm-up job was not worked in 30 s")
	case <-ctx.Done():
		return latencyRun{}, ctx.Err()
	}

	if err := openConns(ctx, t.inserts, enqueuers); err != nil {
		return latencyRun{}, fmt.Errorf("open the enqueuers' connections: %w", err)
	}

	begunAt := make([]time.Time, total)
	committedAt := make([]time.Time, total)
	commits := make([]time.Duration, total)
	start := time.Now()
	cpuStart := t.sampleCPUAt(ctx, start.Add(time.Duration(warmup)*time.Second))
	err = offer(ctx, start, total, rate, enqueuers, func(ctx context.Context, i int) error {
		begin := time.Now()
		begunAt[i] = begin
		err := pgx.BeginFunc(ctx, t.inserts, func(tx pgx.Tx) error {
			_, err := client.InsertTx(ctx, tx, noopArgs{Seq: i, Payload: "order-placed:0123456789abcdef0123456789"}, nil)
			return err
		})
		if err != nil {
			return fmt.Errorf("insert job %d: %w", i, err)
		}
		committedAt[i] = time.Now()
		commits[i] = committedAt[i].Sub(begin)
		return nil
	})
	enqueueing := time.Since(start) - time.Duration(warmup)*time.Second
	if err != nil {
		return latencyRun{}, err
	}
	select {
	case <-worker.done:
	case <-time.After(time.Minute):
		return latencyRun{}, fmt.Errorf("%d of %d jobs worked a minute after the last insert", worker.worked.Load()-1, total)
	case <-ctx.Done():
		return latencyRun{}, ctx.Err()
	}
	first := <-cpuStart
	if first.err != nil {
		return latencyRun{}, first.err
	}
	cpuEnd, err := sampleCPU(ctx, t.pool)
	if err != nil {
		return latencyRun{}, err
	}
	latencies, fromBegin := make([]time.Duration, total), make([]time.Duration, total)
	for i, c := range committedAt {
		worked := time.Unix(0, worker.workedAt[i].Load())
		latencies[i], fromBegin[i] = max(worked.Sub(c), 0), worked.Sub(begunAt[i])
	}
	// Counted first: percentile sorts what it is given, which parts the
	// latencies from their commits.
	p99 := percentile(slices.Clone(latencies[warmupJobs:]), 0.99)
	windows := slowWindows(committedAt[warmupJobs:], latencies[warmupJobs:], p99)
	run := latencyRun{Messages: n, EnqueuedPerSec: round3(float64(n) / enqueueing.Seconds()),
		P50Ms: millis(percentile(latencies[warmupJobs:], 0.5)), P99Ms: millis(p99), P99Windows: windows,
		EnqueueP99Ms: millis(percentile(commits[warmupJobs:], 0.99)), P99FromBeginMs: millis(percentile(fromBegin[warmupJobs:], 0.99)),
		CPU: cpuSince(first.sample, cpuEnd, n)}
	if warmupJobs > 0 {
		run.WarmupP99Ms = millis(percentile(latencies[:warmupJobs], 0.99))
	}
	return run, nil
}
