// Command peers drains the same count of no-op messages through River and
// through Switchyard's dispatcher on one PostgreSQL server in one run, with
// the rounds interleaved, and prints both rates and their ratios
// (issue 17, BENCHMARKS.md "Side by side with River").
//
//	cd tools/peers && go run . --messages 100000
//
// With --rate it compares latency under offered load instead: both enqueue
// at that rate, each message in a transaction of its own, and time it from
// its commit to its delivery (latency.go; issue 17, target 5).
//
// It is a module of its own so that River never enters the product's
// go.mod. Switchyard is measured by exec'ing the console binary, built from
// the main module, as `console bench dispatch` with DATABASE_URL.
//
// With DATABASE_URL it uses that server: River gets a database of its own
// (CREATE DATABASE, dropped at the end), the console bench creates its own
// as it always does. Without DATABASE_URL it runs itself again under the
// test harness's withpg -durable, which starts a throwaway cluster with
// PostgreSQL's stock durability and the embedded server's group commit
// (dbtest.StartDurableCluster), and removes it afterwards.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// options are the command's flags.
type options struct {
	messages     int
	rounds       int
	riverWorkers []int
	// riverDrainCooldowns are River's FetchCooldowns tried in the drains,
	// each with every riverWorkers: at its default (100 ms) a River drain
	// fetches at most MaxWorkers jobs per cooldown, about ten jobs a
	// second per worker, so its best is not its defaults.
	riverDrainCooldowns []time.Duration
	riverConns          int
	retained            int // > 0: also drain after this many delivered messages retained (issue 17, target 6)
	retainedDead        int
	// reseed: seed each retained drain's history anew (the method before
	// 2026-12-07) instead of copying it from a template seeded once per
	// kind (the bench's --retained-template)
	reseed bool
	http   bool // also drain over signed HTTP (issue 17, target 4)
	// rate > 0: the offered-load comparison instead of the drains
	// (issue 17, target 5; latency.go).
	rate           int
	warmup         int // seconds of the same load offered first, untimed
	seconds        int
	riverCooldowns []time.Duration
	latencyWorkers int
	// enqueuers is how many transactions enqueue at once on each side
	// under offered load (the bench's --enqueuers): at 5,000 a second, 16
	// connections waiting on their commits cannot offer the load.
	enqueuers int
	// wake is how Switchyard's enqueuers wake the dispatcher under
	// offered load (the bench's --wake).
	wake string
	// wakeCooldowns are the dispatcher's wake-up cooldowns to try under
	// offered load (the bench's --wake-cooldown), as River's FetchCooldowns
	// are: each side's best counts.
	wakeCooldowns []time.Duration
	repo          string
	console       string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	var o options
	var workers string
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.IntVar(&o.messages, "messages", 100_000, "no-op messages (jobs) each drain delivers")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each runs every configuration once, in a rotated order")
	fs.StringVar(&workers, "river-workers", "100,500,1000", "River MaxWorkers to try; the best median counts (\"\": no River drains)")
	drainCooldowns := fs.String("river-drain-fetch-cooldowns", "100ms,1ms", "River FetchCooldowns to try in the drains, each with every --river-workers; the best median counts (100ms is River's default, which bounds a drain at about ten jobs a second per worker)")
	fs.IntVar(&o.riverConns, "river-conns", 16, "River client's pgxpool MaxConns")
	fs.IntVar(&o.retained, "retained", 0, "also drain Switchyard's messages (ordered and unordered) after this many delivered messages retained in the outbox, and compare with the drains of an empty one")
	fs.IntVar(&o.retainedDead, "retained-dead", 0, "with --retained: dead messages retained too")
	fs.BoolVar(&o.reseed, "reseed", false, "with --retained: seed each round's history anew (minutes each) instead of copying it from a template database seeded once per kind for this run and dropped at its end")
	fs.BoolVar(&o.http, "http", false, "also drain Switchyard's ordered messages over signed HTTP to the bench's local receiver, and compare with the no-op drain")
	fs.IntVar(&o.rate, "rate", 0, "offered load instead of drains: enqueues a second, each in a transaction of its own, for --seconds; compares the latency from each enqueue's commit to its delivery")
	fs.IntVar(&o.seconds, "seconds", 10, "with --rate: how long to enqueue for, timed")
	fs.IntVar(&o.warmup, "warmup-seconds", 2, "with --rate: offer the same load for this many seconds first, untimed, on both sides: the latency then describes each side past its start (0: time from the first message)")
	cooldowns := fs.String("river-fetch-cooldowns", "1ms,5ms,100ms", "with --rate: River FetchCooldowns to try; the lowest median p99 of those that took 95 % of the offered load counts (100ms is River's default, 5ms Switchyard's wake-up cooldown)")
	fs.IntVar(&o.latencyWorkers, "river-latency-workers", 100, "with --rate: River's MaxWorkers")
	fs.IntVar(&o.enqueuers, "enqueuers", 16, "with --rate: transactions enqueuing at once on each side, each on a connection of its own (console bench dispatch's --enqueuers)")
	fs.StringVar(&o.wake, "switchyard-wake", "shared", "with --rate: how Switchyard's enqueuers wake the dispatcher, the bench's --wake: shared (an outbox.Notifier, a busy producer's way, as River's InsertTx bounds its own notifications) or notify (a NOTIFY after every commit)")
	wakeCooldowns := fs.String("switchyard-wake-cooldowns", "5ms", "with --rate: Switchyard's wake-up cooldowns to try (the bench's --wake-cooldown; 5ms is the dispatcher's default), chosen as River's FetchCooldowns are: the lowest median p99 of those that took 95 % of the offered load counts")
	fs.StringVar(&o.repo, "repo", "", "the Switchyard repository's root (default: found from the working directory)")
	fs.StringVar(&o.console, "console", "", "a built console binary (default: go build it from -repo into a temp dir)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.messages <= 0 || o.rounds <= 0 {
		return errors.New("--messages and --rounds must be positive")
	}
	if o.retained < 0 || o.retainedDead < 0 || (o.retainedDead > 0 && o.retained == 0) {
		return errors.New("--retained and --retained-dead must be 0 or more, --retained-dead only with --retained")
	}
	if o.rate < 0 || o.warmup < 0 || (o.rate > 0 && (o.seconds <= 0 || o.latencyWorkers <= 0 || o.enqueuers <= 0)) {
		return errors.New("--rate and --warmup-seconds must be 0 or more; with --rate, --seconds, --river-latency-workers and --enqueuers must be positive")
	}
	if o.wake != "shared" && o.wake != "notify" {
		return fmt.Errorf("--switchyard-wake: %q is neither shared nor notify", o.wake)
	}
	var err error
	if o.riverCooldowns, err = parseDurations("river-fetch-cooldowns", *cooldowns); err != nil {
		return err
	}
	if o.wakeCooldowns, err = parseDurations("switchyard-wake-cooldowns", *wakeCooldowns); err != nil {
		return err
	}
	if o.riverDrainCooldowns, err = parseDurations("river-drain-fetch-cooldowns", *drainCooldowns); err != nil {
		return err
	}
	if o.rate > 0 && (len(o.riverCooldowns) == 0 || len(o.wakeCooldowns) == 0) {
		return errors.New("--rate needs at least one --river-fetch-cooldowns and one --switchyard-wake-cooldowns")
	}
	for _, w := range splitList(workers) {
		n, err := strconv.Atoi(w)
		if err != nil || n <= 0 {
			return fmt.Errorf("--river-workers: %q is not a positive number", w)
		}
		o.riverWorkers = append(o.riverWorkers, n)
	}
	if len(o.riverWorkers) > 0 && o.rate == 0 && len(o.riverDrainCooldowns) == 0 {
		return errors.New("River's drains need at least one --river-drain-fetch-cooldowns")
	}
	if o.repo == "" {
		repo, err := findRepo()
		if err != nil {
			return err
		}
		o.repo = repo
	}
	tmp, err := os.MkdirTemp("", "switchyard-peers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	url, throwaway := os.Getenv("DATABASE_URL"), false
	if url == "" {
		if os.Getenv(envUnderWithpg) == "" {
			return reexecUnderWithpg(ctx, o.repo, tmp, args)
		}
		url, throwaway = os.Getenv("TEST_DATABASE_URL"), true
		if url == "" {
			return errors.New("withpg did not set TEST_DATABASE_URL")
		}
	}
	if o.console == "" {
		o.console = tmp + "/console"
		if err := goBuild(ctx, o.repo, o.console, "./cmd/console"); err != nil {
			return err
		}
	}
	var result any
	if o.rate > 0 {
		result, err = measureLatency(ctx, o, url, throwaway)
	} else {
		result, err = measure(ctx, o, url, throwaway)
	}
	if err != nil {
		return err
	}
	line, err := json.Marshal(result)
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	return nil
}

// config is one of the drains a round runs.
type config struct {
	name          string        // "river-100-1ms", "switchyard-ordered", ...
	riverWorkers  int           // 0 for Switchyard's
	riverCooldown time.Duration // River's FetchCooldown
	aggregates    int           // Switchyard's --aggregates
	retained      bool          // Switchyard's drain after --retained and --retained-dead
	http          bool          // Switchyard's drain with --destination http
}

// runResult is one drain's outcome.
type runResult struct {
	MessagesPerSec float64         `json:"messages_per_sec"`
	Seconds        float64         `json:"seconds"`
	CPU            json.RawMessage `json:"cpu,omitempty"`
	HTTPFloor      *httpFloor      `json:"http_floor,omitempty"` // the HTTP drain's (--http-floor)
}

// httpFloor is the part of `console bench dispatch --http-floor`'s
// http_floor that peers keeps: signed HTTP alone, the same requests as
// the drain's sent again with no database or dispatcher.
type httpFloor struct {
	RequestsPerSec float64 `json:"requests_per_sec"`
	GoMsPer1k      float64 `json:"go_ms_per_1k_requests"`
}

// series is one configuration's runs and their median.
type series struct {
	Runs            []runResult `json:"runs"`
	MessagesPerSec  float64     `json:"messages_per_sec"`             // median of the runs
	CPUTotalMsPer1k float64     `json:"cpu_total_ms_per_1k_messages"` // median, 0 if not measured
}

// result is the JSON object printed last.
type result struct {
	Messages          int                `json:"messages"`
	Rounds            int                `json:"rounds"`
	RiverVersion      string             `json:"river_version,omitempty"` // without River drains (--river-workers ''), the River fields are left out
	RiverBestWorkers  int                `json:"river_best_workers,omitempty"`
	RiverBestCooldown string             `json:"river_best_fetch_cooldown,omitempty"`
	RiverPerSec       float64            `json:"river_messages_per_sec,omitempty"`
	OrderedPerSec     float64            `json:"switchyard_ordered_messages_per_sec"`
	UnorderedPerSec   float64            `json:"switchyard_unordered_messages_per_sec"`
	RatioOrdered      float64            `json:"ratio_ordered_to_river,omitempty"`
	RatioUnordered    float64            `json:"ratio_unordered_to_river,omitempty"`
	River             map[string]*series `json:"river"` // by riverKey: MaxWorkers and FetchCooldown
	Ordered           *series            `json:"switchyard_ordered"`
	Unordered         *series            `json:"switchyard_unordered"`
	// With --retained: the same drains after that history (target 6), and
	// their medians over the empty outbox's.
	Retained               int     `json:"retained,omitempty"`
	RetainedDead           int     `json:"retained_dead,omitempty"`
	OrderedRetained        *series `json:"switchyard_ordered_retained,omitempty"`
	UnorderedRetained      *series `json:"switchyard_unordered_retained,omitempty"`
	RatioOrderedRetained   float64 `json:"ratio_ordered_retained_to_empty,omitempty"`
	RatioUnorderedRetained float64 `json:"ratio_unordered_retained_to_empty,omitempty"`
	// RetainedReseeded: each drain's history was seeded anew (--reseed),
	// not copied from a template seeded once per kind.
	RetainedReseeded bool `json:"retained_reseeded,omitempty"`
	// With --http: the ordered drain over signed HTTP (target 4), and its
	// median over the no-op drain's.
	OrderedHTTP      *series `json:"switchyard_ordered_http,omitempty"`
	RatioOrderedHTTP float64 `json:"ratio_ordered_http_to_noop,omitempty"`
	// And its floor: signed HTTP alone costs HTTPFloorMsPer1k of CPU per
	// 1,000 requests (median). An HTTP drain does the no-op drain's work
	// and sends the same requests, so it costs at least the no-op drain's
	// CPU per message and that floor together; with every CPU of the
	// machine busy it could then reach at most RatioHTTPCeiling of the
	// no-op drain's rate (NumCPU / that cost, over the no-op median).
	// RatioHTTPToCeiling is the measured ratio over it.
	HTTPFloorMsPer1k   float64 `json:"http_floor_ms_per_1k_requests,omitempty"`
	RatioHTTPCeiling   float64 `json:"ratio_ordered_http_to_noop_ceiling,omitempty"`
	RatioHTTPToCeiling float64 `json:"ratio_ordered_http_to_ceiling,omitempty"`
	runContext
	LoadAverageStart   string   `json:"load_average_start"`
	LoadAverageEnd     string   `json:"load_average_end"`
	LoadAverageByRound []string `json:"load_average_by_round"`
}

const method = "each round runs every configuration once, rotating which goes first; River: N jobs inserted with " +
	"InsertManyFast (COPY) and ANALYZEd untimed into an emptied river_job, then a fresh client with one queue of " +
	"MaxWorkers and FetchCooldown (each of --river-drain-fetch-cooldowns with each MaxWorkers), River's defaults " +
	"otherwise, and a no-op worker is timed from Start until the worker has run N times and no job is left " +
	"uncompleted in the table; Switchyard: `console bench dispatch --messages N [--aggregates 0]`, its own " +
	"messages_per_sec (fresh database, seeded untimed, timed until nothing is pending); rates are medians of the " +
	"rounds, River's best is the worker count and FetchCooldown with the highest median, ratios are Switchyard's " +
	"median / River's best; " +
	"with --retained, Switchyard's drains again after `--retained N --retained-dead M` (that history seeded by SQL, vacuumed " +
	"and checkpointed, untimed, once per kind into a template database that each round's bench database is a file copy of: " +
	"`--retained-template`; with --reseed, seeded anew in every round), and their medians / the empty outbox's; with --http, Switchyard's ordered drain again with " +
	"`--destination http --http-floor` (signed webhooks to the bench's local receiver, verified), and its median / the no-op drain's; " +
	"http_floor_ms_per_1k_requests is the median CPU of the same requests sent again with no database or dispatcher (the webhook " +
	"client and the receiver), ratio_ordered_http_to_noop_ceiling the most the HTTP drain could reach with every CPU busy at " +
	"no-op CPU + that floor per message (NumCPU / that cost, over the no-op median), and ratio_ordered_http_to_ceiling the " +
	"measured ratio over it"

func measure(ctx context.Context, o options, url string, throwaway bool) (*result, error) {
	admin, err := connect(ctx, url, 2)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	where, err := checkServer(ctx, admin, throwaway, method)
	if err != nil {
		return nil, err
	}
	var river *riverTarget
	if len(o.riverWorkers) > 0 {
		if river, err = openRiverTarget(ctx, admin, url, o.riverConns, 0); err != nil {
			return nil, err
		}
		defer river.close()
	}

	configs := make([]config, 0, len(o.riverWorkers)*len(o.riverDrainCooldowns)+2)
	for _, w := range o.riverWorkers {
		for _, cd := range o.riverDrainCooldowns {
			configs = append(configs, config{name: "river-" + riverKey(w, cd), riverWorkers: w, riverCooldown: cd})
		}
	}
	configs = append(configs,
		config{name: "switchyard-ordered", aggregates: 1000},
		config{name: "switchyard-unordered", aggregates: 0})
	if o.retained > 0 {
		configs = append(configs,
			config{name: "switchyard-ordered-retained", aggregates: 1000, retained: true},
			config{name: "switchyard-unordered-retained", aggregates: 0, retained: true})
	}
	if o.http {
		configs = append(configs, config{name: "switchyard-ordered-http", aggregates: 1000, http: true})
	}

	r := &result{
		Messages: o.messages, Rounds: o.rounds,
		River: map[string]*series{}, Ordered: &series{}, Unordered: &series{},
		runContext:       where,
		LoadAverageStart: loadAverage(),
	}
	if river != nil {
		r.RiverVersion = riverVersion()
	}
	if o.retained > 0 {
		r.Retained, r.RetainedDead = o.retained, o.retainedDead
		r.OrderedRetained, r.UnorderedRetained = &series{}, &series{}
		r.RetainedReseeded = o.reseed
		if !o.reseed {
			// Left by a run that was stopped, or by another build's.
			if err := dropHistoryTemplates(ctx, admin, configs); err != nil {
				return nil, err
			}
			defer func() {
				if err := dropHistoryTemplates(context.WithoutCancel(ctx), admin, configs); err != nil {
					fmt.Fprintln(os.Stderr, "peers:", err)
				}
			}()
		}
	}
	if o.http {
		r.OrderedHTTP = &series{}
	}
	for round := range o.rounds {
		r.LoadAverageByRound = append(r.LoadAverageByRound, loadAverage())
		var order []string
		for i := range configs {
			c := configs[(i+round)%len(configs)]
			order = append(order, c.name)
			fmt.Fprintf(os.Stderr, "peers: round %d/%d: %s (load %s)\n", round+1, o.rounds, c.name, loadAverage())
			var run runResult
			var s *series
			if c.riverWorkers > 0 {
				run, err = river.drain(ctx, o.messages, c.riverWorkers, c.riverCooldown)
				key := riverKey(c.riverWorkers, c.riverCooldown)
				if r.River[key] == nil {
					r.River[key] = &series{}
				}
				s = r.River[key]
			} else {
				var extra []string
				if c.retained {
					extra = []string{"--retained", strconv.Itoa(o.retained), "--retained-dead", strconv.Itoa(o.retainedDead)}
					if !o.reseed {
						extra = append(extra, "--retained-template", historyTemplate(c))
					}
				}
				if c.http {
					extra = append(extra, "--destination", "http", "--http-floor")
				}
				run, err = consoleDrain(ctx, o.console, url, o.messages, c.aggregates, extra...)
				switch {
				case c.http:
					s = r.OrderedHTTP
				case c.retained && c.aggregates == 0:
					s = r.UnorderedRetained
				case c.retained:
					s = r.OrderedRetained
				case c.aggregates == 0:
					s = r.Unordered
				default:
					s = r.Ordered
				}
			}
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", round+1, c.name, err)
			}
			fmt.Fprintf(os.Stderr, "peers: round %d/%d: %s: %.0f msg/s\n", round+1, o.rounds, c.name, run.MessagesPerSec)
			s.Runs = append(s.Runs, run)
		}
		r.Order = append(r.Order, order)
	}
	r.LoadAverageEnd = loadAverage()

	for _, s := range r.River {
		s.summarize()
	}
	r.Ordered.summarize()
	r.Unordered.summarize()
	for _, w := range o.riverWorkers {
		for _, cd := range o.riverDrainCooldowns {
			s := r.River[riverKey(w, cd)]
			if s.MessagesPerSec > r.RiverPerSec {
				r.RiverPerSec, r.RiverBestWorkers, r.RiverBestCooldown = s.MessagesPerSec, w, cd.String()
			}
		}
	}
	r.OrderedPerSec, r.UnorderedPerSec = r.Ordered.MessagesPerSec, r.Unordered.MessagesPerSec
	if o.retained > 0 {
		r.OrderedRetained.summarize()
		r.UnorderedRetained.summarize()
		r.RatioOrderedRetained = round3(r.OrderedRetained.MessagesPerSec / r.OrderedPerSec)
		r.RatioUnorderedRetained = round3(r.UnorderedRetained.MessagesPerSec / r.UnorderedPerSec)
	}
	if o.http {
		r.OrderedHTTP.summarize()
		r.RatioOrderedHTTP = round3(r.OrderedHTTP.MessagesPerSec / r.OrderedPerSec)
		var floors []float64
		for _, run := range r.OrderedHTTP.Runs {
			if run.HTTPFloor != nil {
				floors = append(floors, run.HTTPFloor.GoMsPer1k)
			}
		}
		if r.HTTPFloorMsPer1k = median(floors); r.HTTPFloorMsPer1k > 0 && r.Ordered.CPUTotalMsPer1k > 0 {
			// ms per 1,000 messages is µs per message.
			ceiling := float64(runtime.NumCPU()) * 1e6 / (r.Ordered.CPUTotalMsPer1k + r.HTTPFloorMsPer1k)
			r.RatioHTTPCeiling = round3(ceiling / r.OrderedPerSec)
			r.RatioHTTPToCeiling = round3(r.RatioOrderedHTTP / r.RatioHTTPCeiling)
		}
	}
	if r.RiverPerSec > 0 {
		r.RatioOrdered = round3(r.OrderedPerSec / r.RiverPerSec)
		r.RatioUnordered = round3(r.UnorderedPerSec / r.RiverPerSec)
	}
	return r, nil
}

// summarize sets the medians of the runs.
func (s *series) summarize() {
	rates := make([]float64, 0, len(s.Runs))
	var cpus []float64
	for _, r := range s.Runs {
		rates = append(rates, r.MessagesPerSec)
		var c struct {
			Total float64 `json:"total_ms_per_1k_messages"`
		}
		if len(r.CPU) > 0 && json.Unmarshal(r.CPU, &c) == nil {
			cpus = append(cpus, c.Total)
		}
	}
	s.MessagesPerSec = median(rates)
	s.CPUTotalMsPer1k = median(cpus)
}

// median of xs (the mean of the middle two for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// loadAverage is /proc/loadavg's 1, 5 and 15 minute figures.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// runContext is what a result says of how and where it was measured.
type runContext struct {
	Order    [][]string `json:"order"` // the configurations of each round, in the order run
	Method   string     `json:"method"`
	Server   string     `json:"server"`
	Settings settings   `json:"settings"`
	CPUs     int        `json:"cpus"`
}

// checkServer reads the server's settings and names it (DATABASE_URL, or
// the throwaway cluster, which must have fsync and synchronous_commit on)
// for a result measured by method.
func checkServer(ctx context.Context, admin *pgxpool.Pool, throwaway bool, method string) (runContext, error) {
	run := runContext{Method: method, Server: "DATABASE_URL", CPUs: runtime.NumCPU()}
	var err error
	if run.Settings, err = readSettings(ctx, admin); err != nil {
		return run, err
	}
	if throwaway {
		if run.Settings.Fsync != "on" || run.Settings.SynchronousCommit != "on" {
			return run, fmt.Errorf("the throwaway cluster has fsync %s, synchronous_commit %s: want both on",
				run.Settings.Fsync, run.Settings.SynchronousCommit)
		}
		run.Server = "throwaway cluster: internal/dbtest/withpg -durable"
	}
	return run, nil
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(list string) []string {
	var out []string
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// historyTemplate names the template database of c's retained history,
// one per kind (the bench refuses a template of another history).
func historyTemplate(c config) string {
	if c.aggregates == 0 {
		return "switchyard_peers_history_unordered"
	}
	return "switchyard_peers_history_ordered"
}

// dropHistoryTemplates drops the retained configurations' templates.
func dropHistoryTemplates(ctx context.Context, admin *pgxpool.Pool, configs []config) error {
	for _, c := range configs {
		if !c.retained {
			continue
		}
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{historyTemplate(c)}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop the history template %s: %w", historyTemplate(c), err)
		}
	}
	return nil
}

// riverKey names a River drain's configuration: its MaxWorkers and
// FetchCooldown ("1000-1ms").
func riverKey(workers int, cooldown time.Duration) string {
	return strconv.Itoa(workers) + "-" + cooldown.String()
}
