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
)

// pagesBenchOptions are the flags of `console bench pages`.
type pagesBenchOptions struct {
	rows         int    // outbox rows seeded
	dead         int    // of which dead
	fingerprints int    // dead letters spread over this many error groups
	requests     int    // timed requests per page (after warmup)
	explain      string // where to write every page's query plans; "": nowhere
	timeout      time.Duration
}

func newPagesBenchFlags(o *pagesBenchOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("console bench pages", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.IntVar(&o.rows, "rows", 1000000, "outbox rows to seed")
	fs.IntVar(&o.dead, "dead", 0, "of which dead (0: a tenth of --rows)")
	fs.IntVar(&o.fingerprints, "fingerprints", 1000, "error groups the dead letters are spread over")
	fs.IntVar(&o.requests, "requests", 100, "timed requests per page, after 10 untimed ones")
	fs.StringVar(&o.explain, "explain", "", "after timing, write each page's query plans (auto_explain with ANALYZE; needs a superuser) to this Markdown file")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up when seeding and timing take longer")
	return fs
}

func printPagesBenchUsage(w io.Writer) {
	fs := newPagesBenchFlags(&pagesBenchOptions{})
	fs.SetOutput(w)
	fmt.Fprint(w, `Usage: console bench pages [flags]

Seeds --rows outbox messages (a tenth dead, over --fingerprints error
groups, with their attempts, dead-letter groups, hourly trends and blocked
aggregates) into a fresh database of its own with INSERT ... SELECT, then
times every console page's server time (in-process requests against the
real handlers), and prints one JSON object as its last line.

Flags:
`)
	fs.PrintDefaults()
}

func parsePagesBenchOptions(args []string) (pagesBenchOptions, error) {
	var o pagesBenchOptions
	fs := newPagesBenchFlags(&o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.dead == 0 {
		o.dead = o.rows / 10
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.rows < 1000 || o.requests < 1 || o.fingerprints < 1:
		return o, errors.New("--rows must be 1000 or more, --requests and --fingerprints 1 or more")
	case o.dead < 0 || o.dead > o.rows/2:
		return o, errors.New("--dead must be between 0 and half of --rows")
	case o.timeout <= 0:
		return o, errors.New("--timeout must be positive")
	}
	return o, nil
}

// pageTiming is one page's server time.
type pageTiming struct {
	P50Ms float64 `json:"p50_ms"`
	P95Ms float64 `json:"p95_ms"`
}

// pagesBenchResult is the JSON line of `console bench pages`. Fields
// without omitempty are the contract BENCHMARKS.md and scripts read.
type pagesBenchResult struct {
	Rows         int                   `json:"rows"`
	Dead         int                   `json:"dead"`
	Fingerprints int                   `json:"fingerprints"`
	Requests     int                   `json:"requests"` // timed per page
	Pages        map[string]pageTiming `json:"pages"`
	MaxP95Ms     float64               `json:"max_p95_ms"`
	SeedSeconds  float64               `json:"seed_seconds"`
	// StatsSnapshotMs is how long the statistics leader took to store its
	// first snapshot of the seeded data (leadership included): what every
	// dashboard tick costs the cluster once, whatever the viewers.
	StatsSnapshotMs float64       `json:"stats_snapshot_ms"`
	CPUs            int           `json:"cpus"`
	LoadAverage     string        `json:"load_average,omitempty"`
	Settings        benchSettings `json:"settings"`
}

// runPagesBench parses the flags of `console bench pages` and runs it.
func runPagesBench(ctx context.Context, cfg Config, args []string, logger *slog.Logger) (any, error) {
	opts, err := parsePagesBenchOptions(args)
	if err != nil {
		return nil, fmt.Errorf("bench pages: %w", err)
	}
	result, err := benchPages(ctx, cfg, opts, logger)
	if err != nil {
		return nil, fmt.Errorf("bench pages: %w", err)
	}
	return result, nil
}

// benchPages seeds a database of its own, times the pages and drops it.
func benchPages(ctx context.Context, cfg Config, opts pagesBenchOptions, logger *slog.Logger) (pagesBenchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout)
	defer cancel()
	env, err := openBenchEnv(ctx, cfg, benchOptions{enqueuers: 4}, logger)
	if err != nil {
		return pagesBenchResult{}, err
	}
	defer env.close(ctx, logger)
	target := env.target
	if err := target.requireOwnDatabase("bench pages seeds a million rows and needs a database of its own"); err != nil {
		return pagesBenchResult{}, err
	}
	start := time.Now()
	if err := seedPages(ctx, target.pool, opts, logger); err != nil {
		return pagesBenchResult{}, err
	}
	seed := time.Since(start)
	logger.Info("seeded; timing pages", slog.Int("rows", opts.rows), slog.Duration("seed_time", seed.Round(time.Millisecond)))
	snapshot, err := storeStatsSnapshot(ctx, target.pool)
	if err != nil {
		return pagesBenchResult{}, err
	}
	pages, err := timePages(ctx, target.pool, opts, logger)
	if err != nil {
		return pagesBenchResult{}, err
	}
	r := pagesBenchResult{
		Rows: opts.rows, Dead: opts.dead, Fingerprints: opts.fingerprints, Requests: opts.requests,
		Pages: pages, SeedSeconds: benchRound(seed.Seconds(), 1), StatsSnapshotMs: benchMillis(snapshot),
		CPUs: runtime.NumCPU(), LoadAverage: env.load, Settings: env.server,
	}
	for _, p := range pages {
		r.MaxP95Ms = max(r.MaxP95Ms, p.P95Ms)
	}
	return r, nil
}
