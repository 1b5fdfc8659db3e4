package bench

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/pgembed"
)

// The floor's pgbench scripts, one per handler: the inbox's essential SQL
// per event (their comments say what they do and leave out).
var (
	//go:embed inbox_floor.pgbench
	inboxFloorScript []byte
	//go:embed inbox_floor_forward.pgbench
	inboxFloorForwardScript []byte
)

// inboxFloorMethod says, in the JSON line, how the side by side measures.
const inboxFloorMethod = "one database on one server; each round runs the inbox bench and the floor once, " +
	"alternating which goes first; before each run (in a database the bench created) the inbox's and the demo's " +
	"tables are emptied and a CHECKPOINT is asked for, so that every run starts from the same state, and autovacuum is " +
	"off for those tables (its once-a-minute visit fell in whichever run was going on). " +
	"Inbox: `console bench inbox` (signed HTTP requests from the senders to the receiver, in this process), " +
	"events_per_sec = requests / wall time, its pool's connections closed before each run and new ones opened before the clock " +
	"(pgbench too connects anew for every run). Floor: pgbench -M prepared " +
	"with as many clients, the script internal/bench/inbox_floor.pgbench (inbox_floor_forward.pgbench with " +
	"--handler forward; a transaction per event: the claim " +
	"with ON CONFLICT DO NOTHING, then the handler's one statement when the claim inserted), same event mix; " +
	"events_per_sec is pgbench's tps without the initial connection time. Rates are medians of the rounds; " +
	"ratio = the inbox's median / the floor's. CPU per 1,000 events: the client's (this process, senders and " +
	"receiver, over the timed phase for the inbox; pgbench's whole run for the floor, its connections included) " +
	"plus the whole server's over the same span (the postmaster and all its children, ended ones included, " +
	"from /proc; 0 where /proc does not show the server)"

// inboxSide is one run of one side.
type inboxSide struct {
	EventsPerSec  float64 `json:"events_per_sec"`
	Seconds       float64 `json:"seconds"`
	Events        int     `json:"events"`
	Duplicates    int     `json:"duplicates"`
	P50Ms         float64 `json:"p50_ms,omitempty"`            // inbox only
	P99Ms         float64 `json:"p99_ms,omitempty"`            // inbox only
	LatencyAvgMs  float64 `json:"latency_avg_ms,omitempty"`    // floor only: pgbench's
	ClientMsPer1k float64 `json:"client_cpu_ms_per_1k_events"` // the bench process (inbox) or pgbench (floor)
	ServerMsPer1k float64 `json:"server_cpu_ms_per_1k_events"` // the whole PostgreSQL server; 0 where /proc is not readable
	TotalMsPer1k  float64 `json:"total_cpu_ms_per_1k_events"`
	LoadAverage   string  `json:"load_average"` // at its start
	// NewConnections is how many connections the inbox opened for the run
	// (inbox only): its pool's, all new, as pgbench's are for every run.
	NewConnections int64 `json:"new_connections,omitempty"`
}

// inboxSeries is one side's runs and medians.
type inboxSeries struct {
	Runs           []inboxSide `json:"runs"`
	EventsPerSec   float64     `json:"events_per_sec"`              // median
	TotalCPUPer1k  float64     `json:"total_cpu_ms_per_1k_events"`  // median
	ServerCPUPer1k float64     `json:"server_cpu_ms_per_1k_events"` // median
	ClientCPUPer1k float64     `json:"client_cpu_ms_per_1k_events"` // median
	P99Ms          float64     `json:"p99_ms,omitempty"`            // median, inbox only
}

func (s *inboxSeries) summarize() {
	pick := func(f func(inboxSide) float64) float64 {
		xs := make([]float64, 0, len(s.Runs))
		for _, r := range s.Runs {
			xs = append(xs, f(r))
		}
		return medianOf(xs)
	}
	s.EventsPerSec = pick(func(r inboxSide) float64 { return r.EventsPerSec })
	s.TotalCPUPer1k = pick(func(r inboxSide) float64 { return r.TotalMsPer1k })
	s.ServerCPUPer1k = pick(func(r inboxSide) float64 { return r.ServerMsPer1k })
	s.ClientCPUPer1k = pick(func(r inboxSide) float64 { return r.ClientMsPer1k })
	s.P99Ms = pick(func(r inboxSide) float64 { return r.P99Ms })
}

// inboxFloorResult is the JSON line of `console bench inbox --floor`.
// Fields without omitempty are the contract BENCHMARKS.md reads.
type inboxFloorResult struct {
	Handler           string        `json:"handler"`
	InboxEventsPerSec float64       `json:"inbox_events_per_sec"` // median
	FloorEventsPerSec float64       `json:"floor_events_per_sec"` // median
	Ratio             float64       `json:"ratio"`                // inbox / floor
	CPURatio          float64       `json:"cpu_ratio"`            // inbox's total CPU per event / the floor's
	InboxP99Ms        float64       `json:"inbox_p99_ms"`         // median
	Events            int           `json:"events"`
	DuplicateShare    float64       `json:"duplicate_share"`
	Concurrency       int           `json:"concurrency"`
	Rounds            int           `json:"rounds"`
	Inbox             *inboxSeries  `json:"inbox"`
	Floor             *inboxSeries  `json:"floor"`
	Order             [][]string    `json:"order"`
	Checkpoints       bool          `json:"checkpoints"` // false: CHECKPOINT was refused (no privilege)
	Pgbench           string        `json:"pgbench"`     // its --version
	Method            string        `json:"method"`
	Database          string        `json:"database"`
	CPUs              int           `json:"cpus"`
	LoadAverageStart  string        `json:"load_average_start"`
	LoadAverageEnd    string        `json:"load_average_end"`
	Settings          benchSettings `json:"settings"`
}

// benchInboxFloor runs the inbox bench and its floor by turns, in one
// database, and returns both medians and the ratio.
func benchInboxFloor(ctx context.Context, cfg Config, opts inboxBenchOptions, logger *slog.Logger) (inboxFloorResult, error) {
	env, err := openBenchEnv(ctx, cfg, benchOptions{enqueuers: opts.concurrency}, logger)
	if err != nil {
		return inboxFloorResult{}, err
	}
	defer env.close(ctx, logger)
	floor, err := newInboxFloor(env, opts)
	if err != nil {
		return inboxFloorResult{}, err
	}
	defer floor.close()
	install := installDemo
	if opts.handler == inbox.HandlerForward {
		install = installForward
	}
	cleanup, err := install(ctx, env.target, logger)
	if err != nil {
		return inboxFloorResult{}, err
	}
	defer cleanup()
	if err := holdAutovacuum(ctx, env.target); err != nil {
		return inboxFloorResult{}, err
	}
	r := inboxFloorResult{Handler: opts.handler,
		Events: opts.events, DuplicateShare: opts.duplicates, Concurrency: opts.concurrency, Rounds: opts.rounds,
		Inbox: &inboxSeries{}, Floor: &inboxSeries{}, Checkpoints: true, Pgbench: floor.version,
		Method: inboxFloorMethod, Database: "created", CPUs: runtime.NumCPU(), LoadAverageStart: env.load,
		Settings: env.server,
	}
	if !env.target.created {
		r.Database = "in_place"
	}
	for round := 1; round <= opts.rounds; round++ {
		order := []string{"floor", "inbox"}
		if round%2 == 0 {
			order = []string{"inbox", "floor"}
		}
		r.Order = append(r.Order, order)
		for _, side := range order {
			if !resetInboxTables(ctx, env.target, logger) {
				r.Checkpoints = false
			}
			source := fmt.Sprintf("%s-%s-%d", env.target.inboxSource(), side, round)
			run, err := floor.runSide(ctx, side, source, logger)
			if err != nil {
				return inboxFloorResult{}, fmt.Errorf("round %d, %s: %w", round, side, err)
			}
			logger.Info("inbox side by side", slog.Int("round", round), slog.String("side", side),
				slog.Float64("events_per_sec", run.EventsPerSec), slog.Float64("total_cpu_ms_per_1k_events", run.TotalMsPer1k),
				slog.String("load_average", run.LoadAverage))
			if side == "floor" {
				r.Floor.Runs = append(r.Floor.Runs, run)
			} else {
				r.Inbox.Runs = append(r.Inbox.Runs, run)
			}
		}
	}
	r.LoadAverageEnd = loadAverage()
	r.Inbox.summarize()
	r.Floor.summarize()
	r.InboxEventsPerSec, r.FloorEventsPerSec, r.InboxP99Ms = r.Inbox.EventsPerSec, r.Floor.EventsPerSec, r.Inbox.P99Ms
	if r.Floor.EventsPerSec > 0 {
		r.Ratio = benchRound(r.Inbox.EventsPerSec/r.Floor.EventsPerSec, 3)
	}
	if r.Floor.TotalCPUPer1k > 0 {
		r.CPURatio = benchRound(r.Inbox.TotalCPUPer1k/r.Floor.TotalCPUPer1k, 3)
	}
	return r, nil
}

// inboxFloor runs the two sides of the side by side.
type inboxFloor struct {
	env      *benchEnv
	opts     inboxBenchOptions
	pgbench  string // the program
	version  string
	dir      string // holds the script
	script   string
	conninfo string   // libpq's, for the bench database
	environ  []string // pgbench's environment: the password, if any
}

func newInboxFloor(env *benchEnv, opts inboxBenchOptions) (*inboxFloor, error) {
	f := &inboxFloor{env: env, opts: opts}
	var err error
	if f.pgbench, err = findPgbench(env.db.Cluster); err != nil {
		return nil, err
	}
	out, err := exec.Command(f.pgbench, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", f.pgbench, err)
	}
	f.version = strings.TrimSpace(string(out))
	if f.dir, err = os.MkdirTemp("", "switchyard-inbox-floor-"); err != nil {
		return nil, err
	}
	script := inboxFloorScript
	if opts.handler == inbox.HandlerForward {
		script = inboxFloorForwardScript
	}
	f.script = filepath.Join(f.dir, "inbox_floor.pgbench")
	if err := os.WriteFile(f.script, script, 0o644); err != nil {
		f.close()
		return nil, err
	}
	f.conninfo, f.environ = libpqConninfo(env.target.config.ConnConfig.Config)
	return f, nil
}

func (f *inboxFloor) close() { _ = os.RemoveAll(f.dir) }

// findPgbench finds pgbench the way internal/pgembed finds the server:
// beside the embedded cluster's binaries, else `pg_config --bindir`, else
// the newest /usr/lib/postgresql/*/bin, else PATH.
func findPgbench(cluster *pgembed.Cluster) (string, error) {
	var dirs []string
	if cluster != nil {
		dirs = append(dirs, cluster.BinDir())
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	versions, _ := filepath.Glob(filepath.Join(pgembed.DefaultSearchRoot, "*", "bin"))
	slices.SortFunc(versions, func(a, b string) int { return compareVersionDirs(b, a) })
	dirs = append(dirs, versions...)
	for _, d := range dirs {
		p := filepath.Join(d, "pgbench")
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("pgbench not found (looked beside the server binaries, in `pg_config --bindir`, %s/*/bin and PATH): "+
		"the floor needs it; it comes with the PostgreSQL server package (Debian: postgresql-15)", pgembed.DefaultSearchRoot)
}

// compareVersionDirs orders /usr/lib/postgresql/<major>/bin by major.
func compareVersionDirs(a, b string) int {
	va, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(a)), 64)
	vb, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(b)), 64)
	switch {
	case va < vb:
		return -1
	case va > vb:
		return 1
	}
	return 0
}

// libpqConninfo is c as a libpq keyword/value string, and the environment
// that carries its password (kept off the command line).
func libpqConninfo(c pgconn.Config) (string, []string) {
	quote := func(v string) string {
		return "'" + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), `'`, `\'`) + "'"
	}
	sslmode := "disable"
	if c.TLSConfig != nil {
		sslmode = "require"
		// pgx's default (no sslmode in the URL) is prefer: TLS first, then
		// a fallback without it, which libpq's prefer also tries.
		if slices.ContainsFunc(c.Fallbacks, func(f *pgconn.FallbackConfig) bool { return f.TLSConfig == nil }) {
			sslmode = "prefer"
		}
	}
	parts := []string{
		"host=" + quote(c.Host), "port=" + strconv.Itoa(int(c.Port)), "dbname=" + quote(c.Database),
		"user=" + quote(c.User), "sslmode=" + sslmode, "application_name=switchyard-bench-floor",
	}
	var environ []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PGPASSWORD=") && !strings.HasPrefix(kv, "PGSERVICE=") {
			environ = append(environ, kv)
		}
	}
	if c.Password != "" {
		environ = append(environ, "PGPASSWORD="+c.Password)
	}
	return strings.Join(parts, " "), environ
}

// runSide runs one side once with source.
func (f *inboxFloor) runSide(ctx context.Context, side, source string, logger *slog.Logger) (inboxSide, error) {
	load := loadAverage()
	var run inboxSide
	var err error
	if side == "floor" {
		run, err = f.runFloor(ctx, source)
	} else {
		run, err = f.runInbox(ctx, source, logger)
	}
	run.LoadAverage = load
	return run, err
}

func (f *inboxFloor) runInbox(ctx context.Context, source string, logger *slog.Logger) (inboxSide, error) {
	if f.opts.handler == inbox.HandlerForward {
		if err := addForwardSource(ctx, f.env.target, source); err != nil {
			return inboxSide{}, err
		}
	}
	// Every run on new backends, as the floor's: pgbench connects anew for
	// each run, and the pool kept from the run before gave the inbox's
	// later rounds warm backends, which spent a third less of the server's
	// CPU per event than new ones (BENCHMARKS.md, "The inbox against its
	// floor"). The connections are still opened before the clock.
	pool := f.env.target.pool
	pool.Reset()
	opened := pool.Stat().NewConnsCount()
	res, err := inboxOnce(ctx, f.env, f.opts, source, logger)
	if err != nil {
		return inboxSide{}, err
	}
	run := inboxSide{
		EventsPerSec: res.EventsPerSec, Seconds: res.Seconds, Events: res.Events, Duplicates: res.Duplicates,
		P50Ms: res.P50Ms, P99Ms: res.P99Ms, NewConnections: pool.Stat().NewConnsCount() - opened,
	}
	run.setCPU(res.self, res.cluster, res.Events)
	return run, nil
}

var (
	pgbenchProcessed = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)/(\d+)`)
	pgbenchFailed    = regexp.MustCompile(`(?m)^number of failed transactions: (\d+)`)
	pgbenchTPS       = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	pgbenchLatency   = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
)

func (f *inboxFloor) runFloor(ctx context.Context, source string) (inboxSide, error) {
	clients := f.opts.concurrency
	perClient := (f.opts.events + clients - 1) / clients
	args := []string{
		"--no-vacuum", "--protocol=prepared", "--client=" + strconv.Itoa(clients),
		"--jobs=" + strconv.Itoa(max(1, min(runtime.NumCPU(), clients))), "--transactions=" + strconv.Itoa(perClient),
		"--file=" + f.script, "--define=source=" + source, "--define=destination=" + f.env.target.forwardDestination(), "--define=unique=0",
		"--define=dup_ppm=" + strconv.Itoa(int(f.opts.duplicates*1e6+0.5)), f.conninfo,
	}
	cmd := exec.CommandContext(ctx, f.pgbench, args...)
	cmd.Env = f.environ
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cpu0, err := sampleClusterCPU(ctx, f.env.target.pool)
	if err != nil {
		return inboxSide{}, err
	}
	if err := cmd.Run(); err != nil {
		return inboxSide{}, fmt.Errorf("pgbench: %w: %s", err, lastLines(stderr.String(), 5))
	}
	cpu1, err := sampleClusterCPU(ctx, f.env.target.pool)
	if err != nil {
		return inboxSide{}, err
	}
	out := stdout.String()
	m := pgbenchProcessed.FindStringSubmatch(out)
	tps := pgbenchTPS.FindStringSubmatch(out)
	if m == nil || tps == nil {
		return inboxSide{}, fmt.Errorf("pgbench: cannot read its report: %s", lastLines(out, 12))
	}
	if m[1] != m[2] {
		return inboxSide{}, fmt.Errorf("pgbench processed %s of %s transactions: %s", m[1], m[2], lastLines(stderr.String(), 5))
	}
	if failed := pgbenchFailed.FindStringSubmatch(out); failed != nil && failed[1] != "0" {
		return inboxSide{}, fmt.Errorf("pgbench: %s failed transactions", failed[1])
	}
	events, _ := strconv.Atoi(m[1])
	rate, _ := strconv.ParseFloat(tps[1], 64)
	unique, err := f.checkFloor(ctx, source)
	if err != nil {
		return inboxSide{}, err
	}
	run := inboxSide{EventsPerSec: benchRound(rate, 0), Events: events, Duplicates: events - unique}
	if rate > 0 {
		run.Seconds = benchRound(float64(events)/rate, 3)
	}
	if l := pgbenchLatency.FindStringSubmatch(out); l != nil {
		run.LatencyAvgMs, _ = strconv.ParseFloat(l[1], 64)
	}
	run.setCPU(cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime(), cpu1.since(cpu0), events)
	return run, nil
}

// checkFloor confirms the floor's effect: one customer (with --handler
// forward: one message, linked to its event) per recorded event, none
// applied twice, none lost; it returns how many were recorded.
func (f *inboxFloor) checkFloor(ctx context.Context, source string) (int, error) {
	effect := `SELECT count(*) FROM switchyard_demo.customers WHERE external_id LIKE $1 || '-%'`
	what := "customers"
	if f.opts.handler == inbox.HandlerForward {
		effect = `SELECT count(*) FROM switchyard.inbox_event_messages m
			JOIN switchyard.inbox_events e ON e.id = m.inbox_event_id
			JOIN switchyard.outbox o ON o.id = m.outbox_id AND o.aggregate_id = e.event_id
			WHERE e.source = $1`
		what = "messages linked to their events"
	}
	var events, effects int
	err := f.env.target.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM switchyard.inbox_events WHERE source = $1), (`+effect+`)`,
		source).Scan(&events, &effects)
	if err != nil {
		return 0, fmt.Errorf("check the floor: %w", err)
	}
	if events == 0 || events != effects {
		return 0, fmt.Errorf("check the floor: %d events recorded, %d %s: want as many, and some", events, effects, what)
	}
	return events, nil
}

func (s *inboxSide) setCPU(client, server time.Duration, events int) {
	per1k := func(d time.Duration) float64 {
		return benchRound(float64(d.Microseconds())/float64(events), 1) // µs per event = ms per 1,000
	}
	s.ClientMsPer1k, s.ServerMsPer1k, s.TotalMsPer1k = per1k(client), per1k(server), per1k(client+server)
}

// inboxFloorTables are the tables both sides of the side by side write, in
// a database the bench created: emptied before every run
// (resetInboxTables) and kept from autovacuum for the bench
// (holdAutovacuum). The demo's customers, where the customer-upsert
// handler writes, are added where the demo schema is (a forward bench has
// none).
var inboxFloorTables = []string{
	"switchyard.inbox_events", "switchyard.inbox_event_attempts", "switchyard.inbox_event_messages",
	"switchyard.inbox_event_duplicates", "switchyard.inbox_duplicates", "switchyard.inbox_entity_versions",
	"switchyard.outbox", "switchyard.outbox_attempts", "switchyard.outbox_blocked_aggregates",
	"switchyard.outbox_aggregates", "switchyard.outbox_aggregate_messages", "switchyard.outbox_stretches",
}

// floorTablesOf is inboxFloorTables, and the demo's customers where the
// demo schema is installed.
func floorTablesOf(ctx context.Context, t *benchTarget) ([]string, error) {
	var demo bool
	if err := t.pool.QueryRow(ctx, `SELECT to_regclass('switchyard_demo.customers') IS NOT NULL`).Scan(&demo); err != nil {
		return nil, fmt.Errorf("look for the demo's customers: %w", err)
	}
	if demo {
		return append(slices.Clone(inboxFloorTables), "switchyard_demo.customers"), nil
	}
	return inboxFloorTables, nil
}

// holdAutovacuum turns autovacuum off, in a database the bench created,
// for the tables both sides write. Left on, its launcher visits the
// database once a minute and vacuums and analyzes what the run before
// wrote (and truncation emptied) in the middle of whichever run is going
// on then: the inbox's runs, which are longer, took it more often than
// the floor's, and its CPU counted as theirs (BENCHMARKS.md, "The inbox
// against its floor"). Every run starts from emptied tables, so there is
// nothing for it to keep in shape; the database is dropped afterwards.
// In place it changes nothing.
func holdAutovacuum(ctx context.Context, t *benchTarget) error {
	if !t.created {
		return nil
	}
	tables, err := floorTablesOf(ctx, t)
	if err != nil {
		return err
	}
	for _, table := range tables {
		if _, err := t.pool.Exec(ctx, `ALTER TABLE `+table+` SET (autovacuum_enabled = false)`); err != nil {
			return fmt.Errorf("hold autovacuum off %s: %w", table, err)
		}
	}
	return nil
}

// resetInboxTables empties, in a database the bench created, the tables
// both sides write, and asks for a checkpoint, so that each run starts
// from the same state. In place it does neither (each run has its own
// source). It returns false when the checkpoint was refused.
func resetInboxTables(ctx context.Context, t *benchTarget, logger *slog.Logger) bool {
	if !t.created {
		return false
	}
	tables, err := floorTablesOf(ctx, t)
	if err == nil {
		_, err = t.pool.Exec(ctx, `TRUNCATE `+strings.Join(tables, ", "))
	}
	if err != nil {
		logger.Warn("empty the inbox's tables between runs", slog.Any("error", err))
	}
	if _, err := t.pool.Exec(ctx, `CHECKPOINT`); err != nil {
		logger.Warn("checkpoint between runs refused", slog.Any("error", err))
		return false
	}
	return true
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// medianOf is the median of xs (the mean of the middle two for an even
// count); 0 for none.
func medianOf(xs []float64) float64 {
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
