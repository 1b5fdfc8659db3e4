package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/outbox"
)

// replayBenchOptions are the flags of `console bench replay`.
type replayBenchOptions struct {
	messages     int           // dead messages seeded, all replayed by one job
	destinations int           // spread over this many destinations
	fingerprints int           // and this many dead-letter groups
	heads        float64       // share of the messages that are their aggregate's blocking dead head
	rate         int           // the job's rate per second
	batch        int           // the runner's BatchSize; 0: its default
	timeout      time.Duration // bounds the measured phase
}

func newReplayBenchFlags(o *replayBenchOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("console bench replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.IntVar(&o.messages, "messages", 100000, "dead messages to seed; one bulk replay job replays them all")
	fs.IntVar(&o.destinations, "destinations", 8, "destinations the messages are spread over")
	fs.IntVar(&o.fingerprints, "fingerprints", 20, "error fingerprints (dead-letter groups) the messages are spread over")
	fs.Float64Var(&o.heads, "heads", 0.1, "share of the messages that are the blocking dead head of an aggregate of their own (0 to 1); the others are unordered")
	fs.IntVar(&o.rate, "rate", bulkreplay.MaxRatePerSecond, "the job's rate limit, replays per second")
	fs.IntVar(&o.batch, "batch", 0, "the runner's batch size (0: the runner's default)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up when the job takes longer")
	return fs
}

func printReplayBenchUsage(w io.Writer) {
	fs := newReplayBenchFlags(&replayBenchOptions{})
	fs.SetOutput(w)
	fmt.Fprint(w, `Usage: console bench replay [flags]

Seeds --messages dead messages in a fresh database of its own (created on
the server, dropped at the end), starts one bulk replay job for all of them
as the console does (bulkreplay.Start and its audit row in one
transaction), runs a bulk replay runner until the job is done, checks that
every message got exactly one replay, and prints one JSON object as its
last line.

Flags:
`)
	fs.PrintDefaults()
}

func parseReplayBenchOptions(args []string) (replayBenchOptions, error) {
	var o replayBenchOptions
	fs := newReplayBenchFlags(&o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.messages < 1 || o.destinations < 1 || o.fingerprints < 1:
		return o, errors.New("--messages, --destinations and --fingerprints must be 1 or more")
	case o.heads < 0 || o.heads > 1:
		return o, errors.New("--heads must be between 0 and 1")
	case o.rate < 1 || o.rate > bulkreplay.MaxRatePerSecond:
		return o, fmt.Errorf("--rate must be from 1 to %d", bulkreplay.MaxRatePerSecond)
	case o.batch < 0 || o.timeout <= 0:
		return o, errors.New("--batch must be 0 or more, --timeout positive")
	}
	return o, nil
}

// runReplayBench is runDispatchBench for `console bench replay`.
func runReplayBench(ctx context.Context, cfg Config, args []string, logger *slog.Logger) (any, error) {
	opts, err := parseReplayBenchOptions(args)
	if err != nil {
		return nil, fmt.Errorf("bench replay: %w", err)
	}
	result, err := benchReplay(ctx, cfg, opts, logger)
	if err != nil {
		return nil, fmt.Errorf("bench replay: %w", err)
	}
	return result, nil
}

// replayBenchResult is the JSON line of `console bench replay`. Fields
// without omitempty are the contract BENCHMARKS.md and scripts read.
type replayBenchResult struct {
	Messages      int     `json:"messages"`
	Replayed      int64   `json:"replayed"` // by the job, each checked to have exactly one replay
	Seconds       float64 `json:"seconds"`  // job started to job done
	ReplaysPerSec float64 `json:"replays_per_sec"`
	RatePerSec    int     `json:"rate_per_sec"` // the job's rate limit: the floor of seconds is messages / rate
	Batch         int     `json:"batch"`
	Destinations  int     `json:"destinations"`
	Fingerprints  int     `json:"fingerprints"`
	BlockingHeads int     `json:"blocking_heads"`
	SeedSeconds   float64 `json:"seed_seconds"`
	// Database is "created" or "in_place", as for bench dispatch. In place,
	// the bench's rows are removed at the end except its audit row: the
	// audit log is append-only.
	Database    string        `json:"database"`
	CPUs        int           `json:"cpus"`
	LoadAverage string        `json:"load_average,omitempty"`
	Settings    benchSettings `json:"settings"`
}

// benchReplay runs one replay bench in a database of its own.
func benchReplay(ctx context.Context, cfg Config, opts replayBenchOptions, logger *slog.Logger) (replayBenchResult, error) {
	env, err := openBenchEnv(ctx, cfg, benchOptions{enqueuers: 4}, logger)
	if err != nil {
		return replayBenchResult{}, err
	}
	defer env.close(ctx, logger)
	target := env.target
	if !target.created {
		defer deleteReplayBenchRows(ctx, target, logger)
	}
	seedStart := time.Now()
	heads, err := seedDeadMessages(ctx, target, opts)
	if err != nil {
		return replayBenchResult{}, err
	}
	seeded := time.Since(seedStart)
	logger.Info("seeded dead messages", slog.Int("messages", opts.messages), slog.Int("blocking_heads", heads), slog.Duration("took", seeded))
	runCtx, cancel := context.WithTimeout(ctx, opts.timeout)
	defer cancel()
	job, elapsed, err := replayAllDead(runCtx, target, opts, logger)
	if err != nil {
		return replayBenchResult{}, err
	}
	if err := checkReplayedOnce(ctx, target, opts.messages, job); err != nil {
		return replayBenchResult{}, err
	}
	r := replayBenchResult{
		Messages: opts.messages, Replayed: job.Replayed, Seconds: benchRound(elapsed.Seconds(), 3),
		ReplaysPerSec: benchRound(float64(job.Replayed)/elapsed.Seconds(), 0), RatePerSec: opts.rate,
		Batch: min(opts.batch, opts.rate), Destinations: opts.destinations, Fingerprints: opts.fingerprints,
		BlockingHeads: heads, SeedSeconds: benchRound(seeded.Seconds(), 3), Database: "created",
		CPUs: runtime.NumCPU(), LoadAverage: env.load, Settings: env.server,
	}
	if opts.batch == 0 {
		r.Batch = min(bulkreplay.DefaultBatchSize, opts.rate)
	}
	if !target.created {
		r.Database = "in_place"
	}
	return r, nil
}

// replayBenchPrefix starts the names of the bench's destinations and
// dead-letter groups.
func (t *benchTarget) replayBenchPrefix() string { return "bench-" + t.suffix + "-" }

// seedDeadMessages writes opts.messages dead messages as the dispatcher
// leaves them, in a few set-based statements: spread over destinations and
// fingerprints; a --heads share are each the dead head of an aggregate of
// their own, which blocks it; their dead-letter groups counted. It returns
// how many blocking heads it wrote.
func seedDeadMessages(ctx context.Context, t *benchTarget, opts replayBenchOptions) (int, error) {
	heads := int(float64(opts.messages) * opts.heads)
	prefix := t.replayBenchPrefix()
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		args := pgx.NamedArgs{"prefix": prefix, "destinations": opts.destinations, "messages": opts.messages,
			"heads": heads, "fingerprints": opts.fingerprints}
		for _, stmt := range []string{
			`INSERT INTO switchyard.destinations (name, kind) SELECT @prefix || d, 'function' FROM generate_series(1, @destinations::int) d`,
			// Every step-th message (step = messages / heads) is an
			// aggregate's head, so heads are spread through the id range.
			`INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload, state, attempts,
				last_error, error_fingerprint, finished_at)
			SELECT 'bench.replay', @prefix || (1 + g % @destinations::int),
				CASE WHEN @heads::int > 0 AND g % greatest(@messages::int / @heads::int, 1) = 0 AND g / greatest(@messages::int / @heads::int, 1) <= @heads::int THEN 'order' ELSE '' END,
				CASE WHEN @heads::int > 0 AND g % greatest(@messages::int / @heads::int, 1) = 0 AND g / greatest(@messages::int / @heads::int, 1) <= @heads::int THEN g::text ELSE '' END,
				jsonb_build_object('n', g, 'customer', 'c' || (g % 997)), 'dead', 12,
				'HTTP 422: rejected by receiver ' || (g % @fingerprints::int), @prefix || 'fp-' || (g % @fingerprints::int), now()
			FROM generate_series(1, @messages::int) g`,
			`INSERT INTO switchyard.outbox_blocked_aggregates (destination, aggregate_type, aggregate_id, dead_message_id)
			SELECT destination, aggregate_type, aggregate_id, id FROM switchyard.outbox
			WHERE aggregate_id <> '' AND destination LIKE @prefix || '%'`,
			`UPDATE switchyard.outbox_aggregates SET done_seq = last_seq, due_at = 'infinity' WHERE destination LIKE @prefix || '%'`,
			`INSERT INTO switchyard.dead_letter_groups (fingerprint, dead, first_dead_at, last_dead_at, sample_id, sample_error, destinations)
			SELECT error_fingerprint, count(*), min(finished_at), max(finished_at), max(id), min(last_error), array_agg(DISTINCT destination)
			FROM switchyard.outbox WHERE destination LIKE @prefix || '%' GROUP BY error_fingerprint`,
		} {
			if _, err := tx.Exec(ctx, stmt, args); err != nil {
				return fmt.Errorf("seed: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if _, err := t.pool.Exec(ctx, `ANALYZE switchyard.outbox`); err != nil {
		return 0, fmt.Errorf("analyze the seeded outbox: %w", err)
	}
	var blocking int
	err = t.pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox_blocked_aggregates WHERE destination LIKE $1 || '%'`, prefix).Scan(&blocking)
	return blocking, err
}

// replayAllDead starts a job for every dead message as the console does
// (bulkreplay.Start and its audit row in one transaction: fenced by the
// job's lease, audited), runs a runner until the job is done, and returns
// the job and the time from start to done.
func replayAllDead(ctx context.Context, t *benchTarget, opts replayBenchOptions, logger *slog.Logger) (bulkreplay.Job, time.Duration, error) {
	changed := make(chan struct{}, 1)
	runner := bulkreplay.NewRunner(t.pool, bulkreplay.Config{Owner: t.owner(), BatchSize: opts.batch, Poll: 10 * time.Millisecond,
		Logger: logger.With(slog.String("component", "bulkreplay")),
		Changed: func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}})
	var job bulkreplay.Job
	started := time.Now()
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		var err error
		job, err = bulkreplay.Start(ctx, tx, bulkreplay.Spec{Mode: outbox.Redeliver, Actor: t.owner(),
			Reason: "bench replay", RatePerSecond: opts.rate, Estimate: int64(opts.messages)})
		if err != nil {
			return err
		}
		_, err = audit.Record(ctx, tx, audit.Entry{Actor: t.owner(), Action: "replay_job.start", Target: "replay job " + job.ID.String(),
			Reason: "bench replay", Outcome: audit.OK, RequestID: job.ID.String(), Detail: job.Filter})
		return err
	})
	if err != nil {
		return job, 0, fmt.Errorf("start the job: %w", err)
	}
	if err := runner.Start(ctx); err != nil {
		return job, 0, err
	}
	defer runner.Stop()
	runner.Wake()
	for job.State == "running" {
		select {
		case <-ctx.Done():
			return job, 0, fmt.Errorf("the job did not finish: %w", ctx.Err())
		case <-changed:
		case <-time.After(time.Second): // a batch that failed and is retried reports nothing
		}
		if err := t.pool.QueryRow(ctx, `SELECT state, replayed FROM switchyard.replay_jobs WHERE id = $1`, job.ID).
			Scan(&job.State, &job.Replayed); err != nil {
			return job, 0, fmt.Errorf("read the job: %w", err)
		}
	}
	elapsed := time.Since(started)
	if job.State != "done" {
		return job, 0, fmt.Errorf("the job ended %s", job.State)
	}
	return job, elapsed, nil
}

// checkReplayedOnce verifies the job's effect: exactly one replay per dead
// message, every blocked aggregate released, every group emptied.
func checkReplayedOnce(ctx context.Context, t *benchTarget, messages int, job bulkreplay.Job) error {
	var replays, distinct, originals, blocked, inGroups int
	err := t.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM switchyard.outbox WHERE replay_of IS NOT NULL),
		(SELECT count(DISTINCT replay_of) FROM switchyard.outbox WHERE replay_of IS NOT NULL),
		(SELECT count(*) FROM switchyard.outbox WHERE replay_of IS NULL AND state = 'dead' AND replays = 1),
		(SELECT count(*) FROM switchyard.outbox_blocked_aggregates WHERE destination LIKE $1 || '%'),
		(SELECT coalesce(sum(dead), 0) FROM switchyard.dead_letter_groups WHERE fingerprint LIKE $1 || '%')`,
		t.replayBenchPrefix()).Scan(&replays, &distinct, &originals, &blocked, &inGroups)
	switch {
	case err != nil:
		return fmt.Errorf("check the replays: %w", err)
	case job.Replayed != int64(messages) || replays != messages || distinct != messages || originals != messages:
		return fmt.Errorf("want exactly one replay of each of %d messages: the job counted %d, the outbox holds %d replays of %d messages, %d originals marked once",
			messages, job.Replayed, replays, distinct, originals)
	case blocked != 0 || inGroups != 0:
		return fmt.Errorf("%d aggregates still blocked, %d messages still counted in dead-letter groups", blocked, inGroups)
	}
	return nil
}

// deleteReplayBenchRows removes, in place, every row the bench wrote but
// its audit row (the audit log is append-only) and its change feed rows
// (retention removes those).
func deleteReplayBenchRows(ctx context.Context, t *benchTarget, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), benchCleanupTimeout)
	defer cancel()
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		for _, stmt := range []string{
			`DELETE FROM switchyard.outbox_blocked_aggregates WHERE destination LIKE @prefix || '%'`,
			`DELETE FROM switchyard.outbox WHERE destination LIKE @prefix || '%'`,
			`DELETE FROM switchyard.outbox_aggregates WHERE destination LIKE @prefix || '%'`,
			`DELETE FROM switchyard.dead_letter_groups WHERE fingerprint LIKE @prefix || '%'`,
			`DELETE FROM switchyard.destinations WHERE name LIKE @prefix || '%'`,
			`DELETE FROM switchyard.replay_jobs WHERE actor = @owner`,
		} {
			if _, err := tx.Exec(ctx, stmt, pgx.NamedArgs{"prefix": t.replayBenchPrefix(), "owner": t.owner()}); err != nil {
				return fmt.Errorf("%s: %w", stmt, err)
			}
		}
		return nil
	})
	if err != nil {
		logger.Error("remove the replay bench's rows", slog.String("prefix", t.replayBenchPrefix()), slog.Any("error", err))
	}
}
