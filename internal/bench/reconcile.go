package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/reconcile"
	"github.com/switchyard/switchyard/internal/reconcile/fakeremote"
)

// reconcileBenchOptions are the flags of `console bench reconcile`.
type reconcileBenchOptions struct {
	rows     int           // rows of the reconciled table
	batch    int           // keys per remote lookup
	rate     float64       // remote lookups per second
	drift    int           // one row in drift rows drifts (a mismatch)
	dispatch int           // messages drained alone and during cycles, for dispatch_ratio; 0: not measured
	rounds   int           // rounds of (cycle, floor scan) and of (alone, during cycles) drains; their medians are compared
	timeout  time.Duration // bounds the cycle
	profile  string        // where to write a CPU profile of the cycle; "": none
}

func newReconcileBenchFlags(o *reconcileBenchOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("console bench reconcile", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.IntVar(&o.rows, "rows", 100000, "rows of the reconciled table, all mirrored by the in-process provider")
	fs.IntVar(&o.batch, "batch", 500, "keys per remote lookup (the check's batch size)")
	fs.Float64Var(&o.rate, "rate", 100000, "remote lookups per second (the check's rate limit)")
	fs.IntVar(&o.drift, "drift", 1000, "one row in this many differs at the provider (a mismatch finding)")
	fs.IntVar(&o.dispatch, "dispatch", 0, "also drain this many messages (bench dispatch's drain) alone and then while cycles run, and report dispatch_ratio; 0: skip")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds of (cycle, floor scan), and with --dispatch of (drain alone, drain while cycles run), each in alternating order; the medians are compared")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up when the cycle takes longer")
	fs.StringVar(&o.profile, "cpuprofile", "", "write a Go CPU profile of the cycle (runner and provider) to this file (go tool pprof)")
	return fs
}

func printReconcileBenchUsage(w io.Writer) {
	fs := newReconcileBenchFlags(&reconcileBenchOptions{})
	fs.SetOutput(w)
	fmt.Fprint(w, `Usage: console bench reconcile [flags]

Seeds a table of --rows rows in a fresh database of its own and an
in-process provider (internal/reconcile/fakeremote) mirroring it with one
row in --drift altered, then runs --rounds rounds of one table check's
cycle with a runner as console serve does (each must find exactly the
altered rows) and of the floor: the same rows read by the same keyset in
batches of --batch, with no remote and nothing recorded. The rounds
alternate which goes first; floor_ratio is the median cycle's rate over
the median floor's. Prints one JSON object as its last line.

Flags:
`)
	fs.PrintDefaults()
}

func parseReconcileBenchOptions(args []string) (reconcileBenchOptions, error) {
	var o reconcileBenchOptions
	fs := newReconcileBenchFlags(&o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.rows < 1 || o.batch < 1 || o.batch > 10000 || o.drift < 1 || o.dispatch < 0 || o.rounds < 1:
		return o, errors.New("--rows, --drift and --rounds must be 1 or more, --batch from 1 to 10000, --dispatch 0 or more")
	case o.rate <= 0 || o.timeout <= 0:
		return o, errors.New("--rate and --timeout must be positive")
	}
	return o, nil
}

// runReconcileBench is runDispatchBench for `console bench reconcile`.
func runReconcileBench(ctx context.Context, cfg Config, args []string, logger *slog.Logger) (any, error) {
	opts, err := parseReconcileBenchOptions(args)
	if err != nil {
		return nil, fmt.Errorf("bench reconcile: %w", err)
	}
	result, err := benchReconcile(ctx, cfg, opts, logger)
	if err != nil {
		return nil, fmt.Errorf("bench reconcile: %w", err)
	}
	return result, nil
}

// reconcileBenchResult is the JSON line of `console bench reconcile`.
// Fields without omitempty are the contract BENCHMARKS.md reads.
type reconcileBenchResult struct {
	Rows        int     `json:"rows"`
	Seconds     float64 `json:"seconds"` // the median cycle, started to complete
	RowsPerSec  float64 `json:"rows_per_sec"`
	RemoteCalls int64   `json:"remote_calls"`
	Findings    int64   `json:"findings"`
	Batch       int     `json:"batch"`
	// FloorRowsPerSec is the median rate of the floor: the table read by
	// the cycle's keyset in batches of Batch, nothing else. FloorRatio is
	// RowsPerSec over it, in one run with the rounds interleaved: the
	// target, where an absolute rate on a shared machine proves nothing.
	FloorRowsPerSec float64   `json:"floor_rows_per_sec"`
	FloorRatio      float64   `json:"floor_ratio"`
	RoundsCycle     []float64 `json:"rounds_rows_per_sec"`
	RoundsFloor     []float64 `json:"rounds_floor_rows_per_sec"`
	// DispatchRatio is the dispatcher's median drain rate while cycles run
	// over its median rate alone (with --dispatch), over --rounds rounds
	// that alternate the two.
	DispatchRatio        float64   `json:"dispatch_ratio,omitempty"`
	DispatchAlone        float64   `json:"dispatch_alone_per_sec,omitempty"`
	DispatchDuring       float64   `json:"dispatch_during_per_sec,omitempty"`
	DispatchRoundsAlone  []float64 `json:"dispatch_rounds_alone,omitempty"`
	DispatchRoundsDuring []float64 `json:"dispatch_rounds_during,omitempty"`
	// CycleRate is the remote lookups per second the cycles were limited
	// to (--rate): the check's remote_rate, 20 by default in a real check.
	CycleRate float64 `json:"cycle_rate"`
	// ProcessCPUSeconds is the CPU time (user + system) of this process
	// (runner and provider, not PostgreSQL) during the cycle: on a shared
	// machine, a steadier measure of its cost than the wall clock.
	ProcessCPUSeconds      float64 `json:"process_cpu_seconds"`
	ProcessCPUMicrosPerRow float64 `json:"process_cpu_us_per_row"`
	// PostgresCPUSeconds is the CPU time of the server processes connected
	// to the bench database during the cycle (0: not on this machine).
	PostgresCPUSeconds      float64       `json:"postgres_cpu_seconds"`
	PostgresCPUMicrosPerRow float64       `json:"postgres_cpu_us_per_row"`
	SeedSeconds             float64       `json:"seed_seconds"`
	Database                string        `json:"database"`
	CPUs                    int           `json:"cpus"`
	LoadAverage             string        `json:"load_average,omitempty"`
	Settings                benchSettings `json:"settings"`
}

// benchReconcile runs one reconcile bench in a database of its own.
func benchReconcile(ctx context.Context, cfg Config, opts reconcileBenchOptions, logger *slog.Logger) (reconcileBenchResult, error) {
	dopts, err := parseBenchOptions([]string{"--messages", strconv.Itoa(max(opts.dispatch, 1)), "--timeout", opts.timeout.String()})
	if err != nil {
		return reconcileBenchResult{}, err
	}
	env, err := openBenchEnv(ctx, cfg, dopts, logger)
	if err != nil {
		return reconcileBenchResult{}, err
	}
	defer env.close(ctx, logger)
	t := env.target
	provider := fakeremote.New()
	defer provider.Close()
	table := "bench_reconcile_" + t.suffix
	if !t.created {
		defer dropReconcileBench(ctx, t, table, logger)
	}
	seedStart := time.Now()
	want, err := seedReconcileBench(ctx, t, provider, table, opts)
	if err != nil {
		return reconcileBenchResult{}, err
	}
	seeded := time.Since(seedStart)
	logger.Info("seeded the reconciled table", slog.Int("rows", opts.rows), slog.Duration("took", seeded))
	runCtx, cancel := context.WithTimeout(ctx, opts.timeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	stopProfile, err := startCPUProfile(opts.profile)
	if err != nil {
		return reconcileBenchResult{}, err
	}
	cpu0, err := sampleCPU(ctx, t.pool)
	if err != nil {
		return reconcileBenchResult{}, err
	}
	runner := reconcile.NewRunner(t.pool, reconcile.Config{Owner: t.owner(), Client: client, Logger: logger})
	var cycles, floors []float64
	for round := range opts.rounds {
		floorFirst := round%2 == 1
		if floorFirst {
			if floors, err = appendFloor(runCtx, t, table, opts, floors); err != nil {
				return reconcileBenchResult{}, err
			}
		}
		took, err := cycleOnce(runCtx, t, runner, opts, want)
		if err != nil {
			return reconcileBenchResult{}, fmt.Errorf("round %d: %w", round+1, err)
		}
		cycles = append(cycles, benchRound(float64(opts.rows)/took.Seconds(), 0))
		if !floorFirst {
			if floors, err = appendFloor(runCtx, t, table, opts, floors); err != nil {
				return reconcileBenchResult{}, err
			}
		}
	}
	cpu1, serr := sampleCPU(ctx, t.pool)
	if serr != nil {
		return reconcileBenchResult{}, serr
	}
	cpu, pg := cpu1.since(cpu0)
	if perr := stopProfile(); perr != nil {
		return reconcileBenchResult{}, perr
	}
	var calls int64
	if err := t.pool.QueryRow(ctx, `SELECT remote_calls FROM switchyard.reconcile_cycles ORDER BY id DESC LIMIT 1`).Scan(&calls); err != nil {
		return reconcileBenchResult{}, fmt.Errorf("read the cycle: %w", err)
	}
	rowsPerSec, floor := medianOf(cycles), medianOf(floors)
	// CPU is sampled around the cycles and the floor scans together; the
	// floor costs this process little (it only reads) and PostgreSQL about
	// what the cycles' reads cost, so the per-row figures are per row
	// cycled.
	cycled := float64(opts.rows * opts.rounds)
	r := reconcileBenchResult{Rows: opts.rows, Seconds: benchRound(float64(opts.rows)/rowsPerSec, 3),
		RowsPerSec: rowsPerSec, RemoteCalls: calls, Findings: want,
		FloorRowsPerSec: floor, FloorRatio: benchRound(rowsPerSec/floor, 3), RoundsCycle: cycles, RoundsFloor: floors,
		Batch: opts.batch, CycleRate: opts.rate, ProcessCPUSeconds: benchRound(cpu.Seconds(), 3),
		ProcessCPUMicrosPerRow:  benchRound(float64(cpu.Microseconds())/cycled, 2),
		PostgresCPUSeconds:      benchRound(pg.Seconds(), 3),
		PostgresCPUMicrosPerRow: benchRound(float64(pg.Microseconds())/cycled, 2), SeedSeconds: benchRound(seeded.Seconds(), 3), Database: "created",
		CPUs: runtime.NumCPU(), LoadAverage: env.load, Settings: env.server}
	if !t.created {
		r.Database = "in_place"
	}
	if opts.dispatch > 0 {
		for round := range opts.rounds {
			alone, during, err := dispatchRound(ctx, t, dopts, client, logger, round%2 == 1)
			if err != nil {
				return reconcileBenchResult{}, err
			}
			r.DispatchRoundsAlone = append(r.DispatchRoundsAlone, benchRound(alone, 0))
			r.DispatchRoundsDuring = append(r.DispatchRoundsDuring, benchRound(during, 0))
		}
		r.DispatchAlone, r.DispatchDuring = medianOf(r.DispatchRoundsAlone), medianOf(r.DispatchRoundsDuring)
		r.DispatchRatio = benchRound(r.DispatchDuring/r.DispatchAlone, 3)
	}
	return r, nil
}

// cycleOnce runs one full cycle of the bench's check, checks that it
// examined every row and found exactly the drift, and returns how long it
// took.
func cycleOnce(ctx context.Context, t *benchTarget, runner *reconcile.Runner, opts reconcileBenchOptions, want int64) (time.Duration, error) {
	if _, err := t.pool.Exec(ctx, `UPDATE switchyard.reconcile_checks SET next_cycle_at = now()`); err != nil {
		return 0, fmt.Errorf("make the check due: %w", err)
	}
	start := time.Now()
	ran, err := runner.RunOnce(ctx)
	took := time.Since(start)
	if err != nil || !ran {
		return 0, fmt.Errorf("run the cycle (ran %v): %w", ran, err)
	}
	var state string
	var examined, findings int64
	if err := t.pool.QueryRow(ctx, `SELECT state, examined, mismatch + missing_remote + missing_local
		FROM switchyard.reconcile_cycles ORDER BY id DESC LIMIT 1`).Scan(&state, &examined, &findings); err != nil {
		return 0, fmt.Errorf("read the cycle: %w", err)
	}
	if state != "complete" || examined != int64(opts.rows) || findings != want {
		return 0, fmt.Errorf("cycle %s examined %d of %d rows and found %d of %d drifted", state, examined, opts.rows, findings, want)
	}
	return took, nil
}

// appendFloor scans the table as the cycle's keyset does (the key and
// the compared columns, batch by batch, in key order), with no remote call
// and nothing recorded, and appends its rate to floors.
func appendFloor(ctx context.Context, t *benchTarget, table string, opts reconcileBenchOptions, floors []float64) ([]float64, error) {
	name := pgx.Identifier{"public", table}.Sanitize()
	start := time.Now()
	var after int64
	scanned := 0
	for {
		rows, err := t.pool.Query(ctx, `SELECT id, status, total FROM `+name+` WHERE id > $1 ORDER BY id LIMIT $2`, after, opts.batch)
		if err != nil {
			return nil, fmt.Errorf("floor scan: %w", err)
		}
		n := 0
		for rows.Next() {
			var status string
			var total int32
			if err := rows.Scan(&after, &status, &total); err != nil {
				rows.Close()
				return nil, fmt.Errorf("floor scan: %w", err)
			}
			n++
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("floor scan: %w", err)
		}
		scanned += n
		if n < opts.batch {
			break
		}
	}
	if scanned != opts.rows {
		return nil, fmt.Errorf("floor scan read %d of %d rows", scanned, opts.rows)
	}
	return append(floors, benchRound(float64(scanned)/time.Since(start).Seconds(), 0)), nil
}

// dispatchRound drains a backlog alone and another while reconcile
// cycles run back to back at the check's rate limit, and returns both
// rates. duringFirst swaps the order: rounds alternate it, so that a
// drift of the server over the run (dead rows of earlier drains, a
// vacuum) weighs on both sides alike instead of always on the second.
func dispatchRound(ctx context.Context, t *benchTarget, dopts benchOptions, client *http.Client, logger *slog.Logger, duringFirst bool) (alone, during float64, err error) {
	if duringFirst {
		if during, err = drainDuringCycles(ctx, t, dopts, client, logger); err != nil {
			return 0, 0, err
		}
	}
	if alone, err = drainOnce(ctx, t, dopts, logger); err != nil {
		return 0, 0, fmt.Errorf("drain alone: %w", err)
	}
	if !duringFirst {
		if during, err = drainDuringCycles(ctx, t, dopts, client, logger); err != nil {
			return 0, 0, err
		}
	}
	return alone, during, nil
}

// drainDuringCycles drains a backlog while reconcile cycles run back to
// back, and returns the drain's rate.
func drainDuringCycles(ctx context.Context, t *benchTarget, dopts benchOptions, client *http.Client, logger *slog.Logger) (float64, error) {
	cycles, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runner := reconcile.NewRunner(t.pool, reconcile.Config{Owner: t.owner() + "-rc", Client: client, Logger: logger})
		for cycles.Err() == nil {
			if _, err := t.pool.Exec(cycles, `UPDATE switchyard.reconcile_checks SET next_cycle_at = now()`); err != nil {
				return
			}
			_, _ = runner.RunOnce(cycles) // a cancelled cycle is the point: the drain is over
		}
	}()
	during, err := drainOnce(ctx, t, dopts, logger)
	stop()
	<-done
	if err != nil {
		return 0, fmt.Errorf("drain during cycles: %w", err)
	}
	return during, nil
}

// seedReconcileBench writes the table, its mirror at the provider (one
// row in opts.drift altered) and the check; it returns the drift count.
func seedReconcileBench(ctx context.Context, t *benchTarget, p *fakeremote.Provider, table string, opts reconcileBenchOptions) (int64, error) {
	name := pgx.Identifier{"public", table}.Sanitize()
	_, err := t.pool.Exec(ctx, `CREATE TABLE `+name+` (id bigint PRIMARY KEY, status text NOT NULL, total integer NOT NULL);
		INSERT INTO `+name+` SELECT g, CASE WHEN g % 3 = 0 THEN 'paid' ELSE 'open' END, g % 100000 FROM generate_series(1, `+strconv.Itoa(opts.rows)+`) g;
		ANALYZE `+name+`;
		INSERT INTO switchyard.destinations (name, kind) VALUES ('bench-rc-`+t.suffix+`', 'function')`)
	if err != nil {
		return 0, fmt.Errorf("seed the table: %w", err)
	}
	var drift int64
	for g := 1; g <= opts.rows; g++ {
		status := "open"
		if g%3 == 0 {
			status = "paid"
		}
		total := g % 100000
		if g%opts.drift == 0 {
			total, drift = -1, drift+1
		}
		p.Put(strconv.Itoa(g), map[string]any{"status": status, "total": total})
	}
	_, err = queries.New(t.pool).ReconcileCheckInsert(ctx, queries.ReconcileCheckInsertParams{
		Name: "bench-" + t.suffix, Kind: reconcile.KindTable, BatchSize: int32(opts.batch), RemoteRate: opts.rate,
		TimeoutMs: 10000, IntervalMs: 3600000, RemoteUrl: p.URL(), Destination: "bench-rc-" + t.suffix, WindowMs: 1,
		TableSchema: "public", TableName: table, KeyColumn: "id", Columns: []string{"status", "total"}, LeaseMs: 60000,
	})
	if err != nil {
		return 0, fmt.Errorf("add the check: %w", err)
	}
	return drift, nil
}

// dropReconcileBench removes what an in-place run wrote: the check (its
// cycles and findings with it), the table and the repairs' destination.
func dropReconcileBench(ctx context.Context, t *benchTarget, table string, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if _, err := t.pool.Exec(ctx, `DELETE FROM switchyard.reconcile_checks WHERE name = $1`, "bench-"+t.suffix); err != nil {
		logger.Warn("bench reconcile: remove the check", slog.Any("err", err))
	}
	if _, err := t.pool.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{"public", table}.Sanitize()); err != nil {
		logger.Warn("bench reconcile: drop the table", slog.Any("err", err))
	}
	if _, err := t.pool.Exec(ctx, `DELETE FROM switchyard.destinations WHERE name = $1`, "bench-rc-"+t.suffix); err != nil {
		logger.Warn("bench reconcile: remove the destination", slog.Any("err", err))
	}
}
