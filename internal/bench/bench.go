package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/switchyard/switchyard/internal/postgres"
)

// benchOptions are the flags of `console bench dispatch`.
type benchOptions struct {
	messages     int           // drain mode: messages seeded before the dispatcher starts; offered-load mode: all enqueued, the warm-up's too
	retained     int           // delivered messages the outbox already holds
	retainedDead int           // dead messages the outbox already holds
	aggregates   int           // messages spread over this many aggregates; 0: unordered
	workers      int           // dispatcher workers
	batch        int           // outbox.Config.BatchSize
	perAggregate int           // outbox.Config.AggregateBatch
	destination  string        // noop or http
	concurrency  int           // the destination's bulkhead (switchyard.destinations.concurrency)
	rate         int           // offered-load mode when > 0: enqueues per second
	seconds      int           // offered-load mode: how long to enqueue, timed
	warmup       int           // offered-load mode: seconds of the same load offered first, untimed
	enqueuers    int           // offered-load mode: concurrent enqueuing transactions
	wake         string        // offered-load mode: after each commit, notify, local or none
	wakeCooldown time.Duration // outbox.Config.WakeCooldown; 0: its default
	timeout      time.Duration // bounds the measured phase
	cpuProfile   string        // where to write a CPU profile of the measured phase; "": none
	latencyOut   string        // offered-load mode: where to write each timed message's commit time and latency; "": nowhere
	httpFloor    bool          // drain mode, --destination http: measure signed HTTP alone after the drain (benchHTTPFloor)

	// The database the history is seeded into once, and the bench's
	// database copied from (--retained-template); "": seeded in the
	// bench's database.
	retainedTemplate string
}

// newBenchFlags defines the bench's flags on a FlagSet of their own: they
// are the bench's, not the console's (the console's --workers, for one,
// means something else).
func newBenchFlags(o *benchOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("console bench dispatch", flag.ContinueOnError)
	// Errors are returned, and printed once by the caller; help is printed
	// by printBenchUsage.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.IntVar(&o.messages, "messages", 200000, "drain mode: messages to seed, then drain")
	fs.IntVar(&o.retained, "retained", 0, "delivered messages the outbox already holds before the measured messages, in the same aggregates (history kept by retention; seeded by SQL, untimed)")
	fs.IntVar(&o.retainedDead, "retained-dead", 0, "dead messages the outbox already holds (unordered, over 1,000 error groups, three failed attempts each)")
	fs.StringVar(&o.retainedTemplate, "retained-template", "", "with --retained or --retained-dead: a database holding that history, seeded into it the first time (and left on the server), and copied as the bench's database by every run after (a file copy: seconds, where seeding ten million messages takes minutes); a template of another history, or one a stopped run left unfinished, is refused; drop it (DROP DATABASE) when done")
	fs.IntVar(&o.aggregates, "aggregates", 1000, "aggregates the messages are spread over, each delivered in order (0: unordered messages)")
	fs.IntVar(&o.workers, "workers", 4, "dispatcher workers (the console's default)")
	fs.IntVar(&o.batch, "batch", 100, "the dispatcher's BatchSize: most deliveries (a message, or an aggregate's messages in order) one worker holds in flight, and so one claim leases")
	fs.IntVar(&o.perAggregate, "aggregate-batch", 32, "the dispatcher's AggregateBatch: most messages of one aggregate a claim leases together")
	fs.StringVar(&o.destination, "destination", "noop", "noop (an in-process function) or http (a signed webhook to a local receiver)")
	fs.IntVar(&o.concurrency, "concurrency", 16, "the destination's bulkhead: most deliveries in flight (the destinations table's default)")
	fs.IntVar(&o.rate, "rate", 0, "offered-load mode: transactional enqueues per second while dispatching (0: drain mode)")
	fs.IntVar(&o.seconds, "seconds", 10, "offered-load mode: how many seconds to enqueue for, timed (after --warmup-seconds)")
	fs.IntVar(&o.warmup, "warmup-seconds", 0, "offered-load mode: offer the same load for this many seconds first, untimed, then --seconds timed: the latency of a dispatcher past its start (its connections' statements planned; on a new outbox, its claims' statistics once it holds 1,000 messages); the warm-up's own p99 is warmup_commit_p99_ms")
	fs.IntVar(&o.enqueuers, "enqueuers", 16, "offered-load mode: concurrent enqueuing transactions")
	fs.StringVar(&o.wake, "wake", "notify", "offered-load mode: after each commit, notify (outbox.Notify: a NOTIFY through PostgreSQL, which wakes dispatchers in any process), shared (an outbox.Notifier: a NOTIFY shared by the enqueues that commit while one is in flight or within --wake-cooldown of the last), local (Dispatcher.Wake, in-process only) or none (the dispatcher polls)")
	fs.DurationVar(&o.wakeCooldown, "wake-cooldown", 0, "the dispatcher's WakeCooldown: the shortest time between two wake-ups from notifications, and with --wake shared between two NOTIFYs (0: the dispatcher's default, 5ms)")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "give up when the measured phase takes longer")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the measured phase to this file (go tool pprof)")
	fs.StringVar(&o.latencyOut, "latency-out", "", "offered-load mode: write each timed message to this file, one CSV row in commit order: its index, when its COMMIT returned (unix nanoseconds) and its time from there to its delivery (microseconds); commit_p99_windows says how clustered the slowest were")
	fs.BoolVar(&o.httpFloor, "http-floor", false, "drain mode with --destination http: after the drain, send as many deliveries again straight through the webhook destination, --concurrency at a time, no database or dispatcher, and report their CPU (http_floor): what signed HTTP alone costs")
	return fs
}

// printBenchUsage writes the bench's help.
func printBenchUsage(w io.Writer) {
	fs := newBenchFlags(&benchOptions{})
	fs.SetOutput(w)
	fmt.Fprint(w, `Usage: console bench dispatch [flags]

Runs the dispatcher against a fresh database of its own (created on the
server, dropped at the end) and prints one JSON object as its last line.
Drain mode seeds --messages, then times their delivery; offered-load mode
(--rate) enqueues at that rate for --warmup-seconds, untimed, then for
--seconds, and reports the latency of the messages enqueued in those.

Flags:
`)
	fs.PrintDefaults()
}

// parseBenchOptions parses and checks the bench's flags.
func parseBenchOptions(args []string) (benchOptions, error) {
	var o benchOptions
	fs := newBenchFlags(&o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.destination != "noop" && o.destination != "http":
		return o, fmt.Errorf("invalid destination %q: want noop or http", o.destination)
	case o.wake != "notify" && o.wake != "shared" && o.wake != "local" && o.wake != "none":
		return o, fmt.Errorf("invalid wake %q: want notify, shared, local or none", o.wake)
	case o.workers < 1 || o.batch < 1 || o.perAggregate < 1 || o.concurrency < 1 || o.enqueuers < 1:
		return o, errors.New("--workers, --batch, --aggregate-batch, --concurrency and --enqueuers must be 1 or more")
	case o.aggregates < 0 || o.rate < 0 || o.warmup < 0 || o.timeout <= 0:
		return o, errors.New("--aggregates, --rate and --warmup-seconds must be 0 or more, --timeout positive")
	case o.retained < 0 || o.retainedDead < 0:
		return o, errors.New("--retained and --retained-dead must be 0 or more")
	case o.retainedTemplate != "" && o.retained+o.retainedDead == 0:
		return o, errors.New("--retained-template needs --retained or --retained-dead")
	case o.rate == 0 && o.messages < 1:
		return o, errors.New("--messages must be 1 or more")
	case o.rate > 0 && o.seconds < 1:
		return o, errors.New("--seconds must be 1 or more with --rate")
	case o.httpFloor && (o.destination != "http" || o.rate > 0):
		return o, errors.New("--http-floor needs --destination http in drain mode")
	case o.rate == 0 && o.warmup > 0:
		return o, errors.New("--warmup-seconds is for offered load (--rate)")
	case o.rate == 0 && o.latencyOut != "":
		return o, errors.New("--latency-out is for offered load (--rate)")
	}
	if o.rate > 0 {
		o.messages = o.rate * (o.warmup + o.seconds)
	}
	return o, nil
}

// warmupMessages is how many of offered-load mode's messages the warm-up
// offers: the first ones, numbered from 0.
func (o benchOptions) warmupMessages() int { return o.rate * o.warmup }

// Command is one `console bench` command, as help texts list it.
type Command struct {
	// Usage is what follows "console bench": the name and its main flags.
	Usage   string
	Summary string
}

// Commands are every `console bench` command Run takes, in the README's
// order (sse-clients, the child process of bench sse, is not one).
func Commands() []Command {
	return []Command{
		{"dispatch [flags]", "measure the dispatcher (see console bench dispatch -h)"},
		{"inbox [flags]", "measure the signed webhook receiver (see console bench inbox -h)"},
		{"pages [flags]", "measure the message pages at a million rows (see console bench pages -h)"},
		{"sse --clients N", "measure the live stream: commit to receipt, memory per client"},
		{"viewers --viewers N", "measure the dispatcher with N live dashboards open against none"},
		{"replay --messages N", "measure a bulk replay (see console bench replay -h)"},
		{"reconcile --rows N", "measure a reconciliation cycle (see console bench reconcile -h)"},
		{"triage --clients N", "measure the triage sockets: commit to receipt, memory per client"},
	}
}

// Config is what every bench needs from the console: where its database
// server is (each bench works in a database of its own on that server).
type Config struct {
	Database postgres.Config
}

// Run runs `console bench <args>`: dispatch, inbox, pages, reconcile,
// replay, sse, triage or viewers (and sse-clients and triage-clients, the
// child processes bench sse and bench triage start: they re-execute the
// running program, which must be the console). Progress
// goes to logger; out receives one JSON object, the result, as its last
// line. -h prints the help to out.
func Run(ctx context.Context, cfg Config, args []string, logger *slog.Logger, out io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		printBenchUsage(out)
		printInboxBenchUsage(out)
		printPagesBenchUsage(out)
		printReplayBenchUsage(out)
		printReconcileBenchUsage(out)
		return nil
	}
	if len(args) == 0 {
		args = []string{""}
	}
	var result any
	var err error
	switch args[0] {
	case "inbox":
		result, err = runInboxBench(ctx, cfg, args[1:], logger)
	case "pages":
		result, err = runPagesBench(ctx, cfg, args[1:], logger)
	case "dispatch":
		result, err = runDispatchBench(ctx, cfg, args[1:], logger)
	case "sse":
		result, err = runSSEBench(ctx, cfg, args[1:], logger)
	case "sse-clients": // the child process of bench sse
		return runSSEClients(ctx, args[1:], out)
	case "viewers":
		result, err = runViewersBench(ctx, cfg, args[1:], logger)
	case "replay":
		result, err = runReplayBench(ctx, cfg, args[1:], logger)
	case "reconcile":
		result, err = runReconcileBench(ctx, cfg, args[1:], logger)
	case "triage":
		result, err = runTriageBench(ctx, cfg, args[1:], logger)
	case "triage-clients": // the child process of bench triage
		return runTriageClients(ctx, args[1:], out)
	default:
		return errors.New("bench: want `console bench dispatch|inbox|pages|reconcile|replay|sse|triage|viewers [flags]` (see console bench -h)")
	}
	if errors.Is(err, flag.ErrHelp) {
		switch args[0] {
		case "inbox":
			printInboxBenchUsage(out)
		case "pages":
			printPagesBenchUsage(out)
		case "replay":
			printReplayBenchUsage(out)
		case "reconcile":
			printReconcileBenchUsage(out)
		default:
			printBenchUsage(out)
		}
		return nil
	}
	if err != nil {
		return err
	}
	line, err := json.Marshal(result)
	if err != nil {
		return fmt.Errorf("bench %s: encode the result: %w", args[0], err)
	}
	if _, err := fmt.Fprintf(out, "%s\n", line); err != nil {
		return fmt.Errorf("bench %s: write the result: %w", args[0], err)
	}
	return nil
}

// runDispatchBench parses the flags of `console bench dispatch` and runs
// it; -h gives an error wrapping flag.ErrHelp.
func runDispatchBench(ctx context.Context, cfg Config, args []string, logger *slog.Logger) (any, error) {
	opts, err := parseBenchOptions(args)
	if err != nil {
		return nil, fmt.Errorf("bench dispatch: %w", err)
	}
	result, err := benchDispatch(ctx, cfg, opts, logger)
	if err != nil {
		return nil, fmt.Errorf("bench dispatch: %w", err)
	}
	return result, nil
}

// runInboxBench is runDispatchBench for `console bench inbox`.
func runInboxBench(ctx context.Context, cfg Config, args []string, logger *slog.Logger) (any, error) {
	opts, err := parseInboxBenchOptions(args)
	if err != nil {
		return nil, fmt.Errorf("bench inbox: %w", err)
	}
	var result any
	if opts.floor {
		result, err = benchInboxFloor(ctx, cfg, opts, logger)
	} else {
		result, err = benchInbox(ctx, cfg, opts, logger)
	}
	if err != nil {
		return nil, fmt.Errorf("bench inbox: %w", err)
	}
	return result, nil
}

// benchResult is the JSON line `console bench dispatch` prints. Fields
// without omitempty are the contract BENCHMARKS.md and scripts read.
type benchResult struct {
	Messages       int     `json:"messages"`
	Aggregates     int     `json:"aggregates"`
	Workers        int     `json:"workers"`
	Batch          int     `json:"batch"`
	AggregateBatch int     `json:"aggregate_batch"`
	Destination    string  `json:"destination"`
	Mode           string  `json:"mode"`    // drain or offered
	Seconds        float64 `json:"seconds"` // the measured phase
	MessagesPerSec float64 `json:"messages_per_sec"`
	// Enqueue to accepted by the destination: in drain mode from created_at
	// (the server's now() in the enqueuing transaction), in offered-load
	// mode from the enqueuing transaction's BEGIN.
	P50Ms                float64 `json:"p50_ms"`
	P99Ms                float64 `json:"p99_ms"`
	MaxMs                float64 `json:"max_ms"`
	RoundTripsPerMessage float64 `json:"round_trips_per_message"`
	RoundTripsMethod     string  `json:"round_trips_method"`
	// Drain mode only: CPU per message, the figure to compare between
	// builds on a shared machine.
	CPU *benchCPU `json:"cpu,omitempty"`
	// Offered-load mode only.
	OfferedPerSec  int     `json:"offered_per_sec,omitempty"`
	EnqueuedPerSec float64 `json:"enqueued_per_sec,omitempty"`
	Wake           string  `json:"wake,omitempty"`
	// The enqueuing transactions alone, BEGIN to COMMIT returned: the
	// part of p50_ms and p99_ms before the dispatcher can see a message.
	EnqueueP50Ms float64 `json:"enqueue_p50_ms,omitempty"`
	EnqueueP99Ms float64 `json:"enqueue_p99_ms,omitempty"`
	// From each enqueue's COMMIT returned to the message's delivery: issue
	// 17's measure ("enqueue-commit to delivered"), where p50_ms and
	// p99_ms also hold the enqueuing transaction.
	CommitP50Ms float64 `json:"commit_p50_ms,omitempty"`
	CommitP99Ms float64 `json:"commit_p99_ms,omitempty"`
	// How many windows of 100 ms, by COMMIT time, hold the timed messages
	// at or over commit_p99_ms: one or two say that the p99 was set by as
	// many stalls, where everything committed in a window waited, and not
	// by a cost every message pays; about as many as those messages say
	// the opposite (--latency-out has them one by one).
	CommitP99Windows int `json:"commit_p99_windows,omitempty"`
	// The warm-up (--warmup-seconds), offered before the timed phase and
	// left out of every other figure: its commit_p99_ms, the dispatcher's
	// start included.
	WarmupSeconds     int     `json:"warmup_seconds,omitempty"`
	WarmupCommitP99Ms float64 `json:"warmup_commit_p99_ms,omitempty"`
	// Drain mode only: how long seeding took (not measured).
	SeedSeconds float64 `json:"seed_seconds,omitempty"`
	// Drain mode only: the history the outbox held before the drain
	// (--retained, --retained-dead) and how long seeding it took.
	Retained            int     `json:"retained,omitempty"`
	RetainedDead        int     `json:"retained_dead,omitempty"`
	RetainedSeedSeconds float64 `json:"retained_seed_seconds,omitempty"`

	// With --retained-template: the template the bench's database was
	// copied from, and whether this run seeded it (otherwise
	// retained_seed_seconds is the copy's time alone).
	RetainedTemplate       string `json:"retained_template,omitempty"`
	RetainedTemplateSeeded bool   `json:"retained_template_seeded,omitempty"`

	Concurrency int `json:"concurrency"`
	// Database is "created" (a fresh database, dropped afterwards) or
	// "in_place" (the role may not create databases; the configured
	// database's empty outbox was used and cleaned afterwards).
	Database string `json:"database"`
	CPUs     int    `json:"cpus"`
	// LoadAverage is /proc/loadavg's 1, 5 and 15 minute figures at the
	// start: on a shared machine, how busy it was with other work.
	LoadAverage string        `json:"load_average,omitempty"`
	Settings    benchSettings `json:"settings"`
	// With --http-floor: signed HTTP alone, after the drain.
	HTTPFloor *benchHTTPFloor `json:"http_floor,omitempty"`
	// Where the server has pg_stat_statements (its library loaded, the
	// extension created in the configured database): the statements of the
	// bench's database that took the most execution time over the measured
	// phase (offered load: the enqueues' included), with their calls,
	// plans, buffers and WAL.
	ServerStatements []serverStatement `json:"server_statements,omitempty"`
	// Drain mode: the switchyard tables and indexes of the bench's
	// database whose shared buffers the measured phase touched most (the
	// dispatcher's and the bench's checks'), from pg_statio.
	ServerRelations []serverRelation `json:"server_relations,omitempty"`
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
	CommitDelay       string `json:"commit_delay"`
	CommitSiblings    string `json:"commit_siblings"`
}

// benchEnv is where every bench runs: a database of its own (see
// openBenchTarget) on the configured server or the embedded one, with the
// machine's load average from before it began and the server settings
// that decide what a commit costs, for the JSON line.
type benchEnv struct {
	db     *postgres.DB
	target *benchTarget
	load   string
	server benchSettings
}

// openBenchEnv opens the database (DATABASE_URL or the embedded default)
// and the bench's own database on it; close removes both again.
func openBenchEnv(ctx context.Context, cfg Config, opts benchOptions, logger *slog.Logger) (*benchEnv, error) {
	env := &benchEnv{load: loadAverage()}
	var err error
	if env.db, err = postgres.Open(ctx, cfg.Database, logger); err != nil {
		return nil, err
	}
	if env.target, err = openBenchTarget(ctx, env.db, opts, logger); err != nil {
		env.db.Close()
		return nil, err
	}
	if env.server, err = readBenchSettings(ctx, env.target, env.db.Cluster != nil); err != nil {
		env.close(ctx, logger)
		return nil, err
	}
	return env, nil
}

func (e *benchEnv) close(ctx context.Context, logger *slog.Logger) {
	e.target.close(ctx, logger)
	e.db.Close()
}

// benchDispatch runs one dispatch bench in a database of its own.
func benchDispatch(ctx context.Context, cfg Config, opts benchOptions, logger *slog.Logger) (benchResult, error) {
	env, err := openBenchEnv(ctx, cfg, opts, logger)
	if err != nil {
		return benchResult{}, err
	}
	defer env.close(ctx, logger)
	target := env.target
	if opts.retained+opts.retainedDead > 0 {
		if err := target.requireOwnDatabase("--retained and --retained-dead seed rows that need a database of their own"); err != nil {
			return benchResult{}, err
		}
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
	r := m.result(opts, target, env.server)
	r.LoadAverage = env.load
	if opts.httpFloor {
		floor, err := bench.httpFloor(ctx)
		if err != nil {
			return benchResult{}, err
		}
		r.HTTPFloor = &floor
	}
	return r, nil
}

// loadAverage returns the machine's load averages, or "" where
// /proc/loadavg does not exist.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	fields := strings.Fields(string(b))
	if len(fields) < 3 {
		return ""
	}
	return strings.Join(fields[:3], " ")
}

func readBenchSettings(ctx context.Context, target *benchTarget, embedded bool) (benchSettings, error) {
	s := benchSettings{Embedded: embedded}
	err := target.pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('full_page_writes'),
		current_setting('shared_buffers'), current_setting('wal_sync_method'), current_setting('max_connections'),
		current_setting('commit_delay'), current_setting('commit_siblings')`).
		Scan(&s.ServerVersion, &s.Fsync, &s.SynchronousCommit, &s.FullPageWrites, &s.SharedBuffers, &s.WalSyncMethod, &s.MaxConnections,
			&s.CommitDelay, &s.CommitSiblings)
	if err != nil {
		return s, fmt.Errorf("read server settings: %w", err)
	}
	s.ServerVersion, _, _ = strings.Cut(s.ServerVersion, " ") // "15.14 (Debian 15.14-0+deb12u1)"
	return s, nil
}

// result assembles the JSON line from a measurement.
func (m benchMeasurement) result(opts benchOptions, target *benchTarget, server benchSettings) benchResult {
	r := benchResult{
		Messages: m.messages, Aggregates: opts.aggregates, Workers: opts.workers, Batch: opts.batch, AggregateBatch: opts.perAggregate,
		Destination: opts.destination, Mode: "drain", Seconds: benchRound(m.elapsed.Seconds(), 3),
		MessagesPerSec:       benchRound(float64(m.messages)/m.elapsed.Seconds(), 0),
		P50Ms:                benchMillis(m.latency.percentile(0.50)),
		P99Ms:                benchMillis(m.latency.percentile(0.99)),
		MaxMs:                benchMillis(m.latency.percentile(1)),
		RoundTripsPerMessage: benchRound(float64(m.statements)/float64(m.messages), 3),
		RoundTripsMethod:     roundTripsMethod,
		SeedSeconds:          benchRound(m.seed.Seconds(), 3),
		Retained:             opts.retained,
		RetainedDead:         opts.retainedDead,
		RetainedSeedSeconds:  benchRound(m.retainedSeed.Seconds(), 3),
		Concurrency:          opts.concurrency,
		Database:             "created",
		CPUs:                 runtime.NumCPU(),
		Settings:             server,
	}
	if !target.created {
		r.Database = "in_place"
	}
	r.RetainedTemplate, r.RetainedTemplateSeeded = target.template.name, target.template.seeded > 0
	if m.cpu.Method != "" {
		r.CPU = &m.cpu
	}
	r.ServerStatements, r.ServerRelations = m.serverStatements, m.serverRelations
	if opts.rate > 0 {
		r.Mode, r.OfferedPerSec, r.Wake = "offered", opts.rate, opts.wake
		r.EnqueuedPerSec = benchRound(float64(m.messages)/m.enqueueing.Seconds(), 0)
		r.EnqueueP50Ms, r.EnqueueP99Ms = benchMillis(m.commits.percentile(0.5)), benchMillis(m.commits.percentile(0.99))
		r.CommitP50Ms, r.CommitP99Ms = benchMillis(m.sinceCommit.percentile(0.5)), benchMillis(m.sinceCommit.percentile(0.99))
		r.CommitP99Windows = m.commitP99Windows
		if opts.warmup > 0 {
			r.WarmupSeconds, r.WarmupCommitP99Ms = opts.warmup, benchMillis(m.warmupSinceCommit.percentile(0.99))
		}
	}
	return r
}

// DefinesFlag reports whether the dispatch, inbox or replay bench defines a
// flag of that name: `console bench` leaves such a flag to the bench even
// where the console has one of the same name (--workers).
func DefinesFlag(name string) bool {
	return newBenchFlags(&benchOptions{}).Lookup(name) != nil ||
		newInboxBenchFlags(&inboxBenchOptions{}).Lookup(name) != nil ||
		newReplayBenchFlags(&replayBenchOptions{}).Lookup(name) != nil
}
