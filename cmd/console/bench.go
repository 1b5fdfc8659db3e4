package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"time"
)

// benchOptions are the flags of `console bench dispatch`.
type benchOptions struct {
	messages    int           // drain mode: messages seeded before the dispatcher starts
	aggregates  int           // messages spread over this many aggregates; 0: unordered
	workers     int           // dispatcher workers
	batch       int           // most messages one claim leases
	destination string        // noop or http
	concurrency int           // the destination's bulkhead (switchyard.destinations.concurrency)
	rate        int           // offered-load mode when > 0: enqueues per second
	seconds     int           // offered-load mode: how long to enqueue
	enqueuers   int           // offered-load mode: concurrent enqueuing transactions
	wake        bool          // offered-load mode: call Dispatcher.Wake after each commit
	timeout     time.Duration // bounds the measured phase
}

// newBenchFlags defines the bench's flags on a FlagSet of their own: they
// are the bench's, not the console's (the console's --workers, for one,
// means something else).
func newBenchFlags(o *benchOptions, usage io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("console bench dispatch", flag.ContinueOnError)
	fs.SetOutput(usage)
	fs.IntVar(&o.messages, "messages", 200000, "drain mode: messages to seed, then drain")
	fs.IntVar(&o.aggregates, "aggregates", 1000, "aggregates the messages are spread over, each delivered in order (0: unordered messages)")
	fs.IntVar(&o.workers, "workers", 8, "dispatcher workers")
	fs.IntVar(&o.batch, "batch", 500, "most messages one claim leases")
	fs.StringVar(&o.destination, "destination", "noop", "noop (an in-process function) or http (a signed webhook to a local receiver)")
	fs.IntVar(&o.concurrency, "concurrency", 16, "the destination's bulkhead: most deliveries in flight (the destinations table's default)")
	fs.IntVar(&o.rate, "rate", 0, "offered-load mode: transactional enqueues per second while dispatching (0: drain mode)")
	fs.IntVar(&o.seconds, "seconds", 10, "offered-load mode: how many seconds to enqueue for")
	fs.IntVar(&o.enqueuers, "enqueuers", 16, "offered-load mode: concurrent enqueuing transactions")
	fs.BoolVar(&o.wake, "wake", true, "offered-load mode: wake the dispatcher after each commit, as a service embedding it would; false: it finds messages by polling")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "give up when the measured phase takes longer")
	fs.Usage = func() {
		fmt.Fprint(usage, `Usage: console bench dispatch [flags]

Runs the dispatcher against a fresh database of its own (created on the
server, dropped at the end) and prints one JSON object as its last line.
Drain mode seeds --messages, then times their delivery; offered-load mode
(--rate) enqueues at that rate for --seconds and reports latency.

Flags:
`)
		fs.PrintDefaults()
	}
	return fs
}

// parseBenchOptions parses and checks the bench's flags.
func parseBenchOptions(args []string, usage io.Writer) (benchOptions, error) {
	var o benchOptions
	fs := newBenchFlags(&o, usage)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.destination != "noop" && o.destination != "http":
		return o, fmt.Errorf("invalid destination %q: want noop or http", o.destination)
	case o.workers < 1 || o.batch < 1 || o.concurrency < 1 || o.enqueuers < 1:
		return o, errors.New("--workers, --batch, --concurrency and --enqueuers must be 1 or more")
	case o.aggregates < 0 || o.rate < 0 || o.timeout <= 0:
		return o, errors.New("--aggregates and --rate must be 0 or more, --timeout positive")
	case o.rate == 0 && o.messages < 1:
		return o, errors.New("--messages must be 1 or more")
	case o.rate > 0 && o.seconds < 1:
		return o, errors.New("--seconds must be 1 or more with --rate")
	}
	if o.rate > 0 {
		o.messages = o.rate * o.seconds
	}
	return o, nil
}

// benchCommand runs `console bench <args>`; the only benchmark is
// dispatch. Progress goes to logger; out receives one JSON object, the
// result, as its last line.
func benchCommand(ctx context.Context, cfg config, args []string, logger *slog.Logger, out io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		newBenchFlags(&benchOptions{}, out).Usage()
		return nil
	}
	if len(args) == 0 || args[0] != "dispatch" {
		return errors.New("bench: want `console bench dispatch [flags]` (see console bench dispatch -h)")
	}
	opts, err := parseBenchOptions(args[1:], out)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bench dispatch: %w", err)
	}
	result, err := benchDispatch(ctx, cfg, opts, logger)
	if err != nil {
		return fmt.Errorf("bench dispatch: %w", err)
	}
	line, err := json.Marshal(result)
	if err != nil {
		return fmt.Errorf("bench dispatch: encode the result: %w", err)
	}
	if _, err := fmt.Fprintf(out, "%s\n", line); err != nil {
		return fmt.Errorf("bench dispatch: write the result: %w", err)
	}
	return nil
}

// benchResult is the JSON line `console bench dispatch` prints. Fields
// without omitempty are the contract BENCHMARKS.md and scripts read.
type benchResult struct {
	Messages             int     `json:"messages"`
	Aggregates           int     `json:"aggregates"`
	Workers              int     `json:"workers"`
	Batch                int     `json:"batch"`
	Destination          string  `json:"destination"`
	Mode                 string  `json:"mode"`    // drain or offered
	Seconds              float64 `json:"seconds"` // the measured phase
	MessagesPerSec       float64 `json:"messages_per_sec"`
	P50Ms                float64 `json:"p50_ms"` // enqueue (created_at) to accepted by the destination
	P99Ms                float64 `json:"p99_ms"`
	MaxMs                float64 `json:"max_ms"`
	RoundTripsPerMessage float64 `json:"round_trips_per_message"`
	RoundTripsMethod     string  `json:"round_trips_method"`
	// Offered-load mode only.
	OfferedPerSec  int     `json:"offered_per_sec,omitempty"`
	EnqueuedPerSec float64 `json:"enqueued_per_sec,omitempty"`
	Wake           *bool   `json:"wake,omitempty"`
	// Drain mode only: how long seeding took (not measured).
	SeedSeconds float64 `json:"seed_seconds,omitempty"`
	Concurrency int     `json:"concurrency"`
	// Database is "created" (a fresh database, dropped afterwards) or
	// "in_place" (the role may not create databases; the configured
	// database's empty outbox was used and cleaned afterwards).
	Database string        `json:"database"`
	CPUs     int           `json:"cpus"`
	Settings benchSettings `json:"settings"`
}

// benchSettings are the server settings that decide what a commit costs.
type benchSettings struct {
	ServerVersion     string `json:"server_version"`
	Embedded          bool   `json:"embedded"`
	Fsync             string `json:"fsync"`
	SynchronousCommit string `json:"synchronous_commit"`
	FullPageWrites    string `json:"full_page_writes"`
	SharedBuffers     string `json:"shared_buffers"`
	WalSyncMethod     string `json:"wal_sync_method"`
	MaxConnections    string `json:"max_connections"`
}

// benchDispatch opens the database (DATABASE_URL or the embedded default),
// runs one bench in a database of its own and removes it again.
func benchDispatch(ctx context.Context, cfg config, opts benchOptions, logger *slog.Logger) (benchResult, error) {
	db, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return benchResult{}, err
	}
	defer db.Close()
	target, err := openBenchTarget(ctx, db, opts, logger)
	if err != nil {
		return benchResult{}, err
	}
	defer target.close(ctx, logger)
	server, err := readBenchSettings(ctx, target, db.cluster != nil)
	if err != nil {
		return benchResult{}, err
	}
	bench, err := newBenchRun(ctx, target, opts, logger)
	if err != nil {
		return benchResult{}, err
	}
	defer bench.close()
	var m benchMeasurement
	if opts.rate > 0 {
		m, err = bench.offered(ctx)
	} else {
		m, err = bench.drain(ctx)
	}
	if err != nil {
		return benchResult{}, err
	}
	return m.result(opts, target, server), nil
}

func readBenchSettings(ctx context.Context, target *benchTarget, embedded bool) (benchSettings, error) {
	s := benchSettings{Embedded: embedded}
	err := target.pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('full_page_writes'),
		current_setting('shared_buffers'), current_setting('wal_sync_method'), current_setting('max_connections')`).
		Scan(&s.ServerVersion, &s.Fsync, &s.SynchronousCommit, &s.FullPageWrites, &s.SharedBuffers, &s.WalSyncMethod, &s.MaxConnections)
	if err != nil {
		return s, fmt.Errorf("read server settings: %w", err)
	}
	s.ServerVersion, _, _ = strings.Cut(s.ServerVersion, " ") // "15.14 (Debian 15.14-0+deb12u1)"
	return s, nil
}

// result assembles the JSON line from a measurement.
func (m benchMeasurement) result(opts benchOptions, target *benchTarget, server benchSettings) benchResult {
	r := benchResult{
		Messages: m.messages, Aggregates: opts.aggregates, Workers: opts.workers, Batch: opts.batch,
		Destination: opts.destination, Mode: "drain", Seconds: benchRound(m.elapsed.Seconds(), 3),
		MessagesPerSec:       benchRound(float64(m.messages)/m.elapsed.Seconds(), 0),
		P50Ms:                benchMillis(m.latency.percentile(0.50)),
		P99Ms:                benchMillis(m.latency.percentile(0.99)),
		MaxMs:                benchMillis(m.latency.percentile(1)),
		RoundTripsPerMessage: benchRound(float64(m.statements)/float64(m.messages), 3),
		RoundTripsMethod:     roundTripsMethod,
		SeedSeconds:          benchRound(m.seed.Seconds(), 3),
		Concurrency:          opts.concurrency,
		Database:             "created",
		CPUs:                 runtime.NumCPU(),
		Settings:             server,
	}
	if !target.created {
		r.Database = "in_place"
	}
	if opts.rate > 0 {
		wake := opts.wake
		r.Mode, r.OfferedPerSec, r.Wake = "offered", opts.rate, &wake
		r.EnqueuedPerSec = benchRound(float64(m.messages)/m.enqueueing.Seconds(), 0)
	}
	return r
}
