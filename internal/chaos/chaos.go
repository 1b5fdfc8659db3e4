// Package chaos is `console chaos`: it runs real console processes (three
// dispatchers and two console instances) on one PostgreSQL, with a
// recording webhook destination that fails 30 % of deliveries and a
// JetStream destination (an in-process NATS server), an enqueuer writing
// orders with their messages in business transactions, an inbox sender
// sending signed events out of order and twice to both instances, SSE and
// WebSocket clients of both instances, and a seeded schedule of faults
// (kill -9, SIGSTOP past the lease, PostgreSQL restarts, terminated
// backends, a destination that is slow, resets or black-holes, a
// partition from PostgreSQL). When the faults stop and everything
// drained, a checker compares each destination's history with what the
// database committed (lost, unexpected, duplicated, out of order), counts
// the inbox's effects per event, and compares every client's view with
// the database.
package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"
)

const (
	// failRatio is the share of attempts the destination answers with 500.
	failRatio = 0.3
	// destinationName is the run's webhook destination.
	destinationName = "chaos"
	// secretEnv names the signing secret in the dispatchers' environment.
	secretEnv    = "CHAOS_WEBHOOK_SECRET"
	chaosSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	dispatchers  = 3
	lease        = 5 * time.Second
	drainTimeout = 3 * time.Minute
)

// Config is one run.
type Config struct {
	// Binary is the console binary the processes run.
	Binary string
	// Seconds of faults and traffic; the drain comes after.
	Seconds int
	// Seed makes the schedule of faults, the destination's failures and
	// the enqueued traffic repeatable (the processes' timing is not).
	Seed uint64
	// Faults is the mix (AllFaults when empty).
	Faults []string
	// DatabaseURL, when set, is the server to run on (PostgreSQL restarts
	// are then left out); otherwise an embedded cluster in DataDir.
	DatabaseURL string
	DataDir     string
	// WorkDir receives the processes' logs.
	WorkDir string
	// Rate is how many business transactions per second the enqueuer
	// writes (each 1–3 messages); 0: 40.
	Rate int
	// Env is the environment the console processes start with, besides
	// the settings the run makes (PATH, say).
	Env    []string
	Logger *slog.Logger
}

// Summary is the run's result, printed as JSON. Its top-level counts are
// summed over both destinations; Destinations has each one's.
type Summary struct {
	Seed    uint64 `json:"seed"`
	Seconds int    `json:"seconds"`
	verdict
	Destinations  map[string]verdict `json:"destinations"`
	Inbox         inboxVerdict       `json:"inbox"`
	Views         viewVerdict        `json:"views"`
	Sockets       viewVerdict        `json:"sockets"`
	Faults        map[string]int     `json:"faults"`
	ProcessStarts int                `json:"process_starts"`
	ProcessExits  int                `json:"process_exits"`
	ServeStarts   int                `json:"serve_starts"` // the instances' (the two above: the dispatchers')
	ServeExits    int                `json:"serve_exits"`
	DrainSeconds  float64            `json:"drain_seconds"`
	PendingLeft   int                `json:"pending_left"`
	Failures      []string           `json:"failures"`
	Passed        bool               `json:"passed"`
}

// destinations are the run's two destinations.
var destinations = []string{destinationName, jetstreamDestination}

// Run runs the processes, the traffic and the faults for cfg.Seconds,
// waits for the outbox to drain, checks the history and returns the
// summary. An error means the run could not be made; a run that was made
// and failed the check returns its Summary with Passed false.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Faults) == 0 {
		cfg.Faults = AllFaults
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 40
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return Summary{}, fmt.Errorf("work directory: %w", err)
	}
	db, err := openDatabase(ctx, cfg.DatabaseURL, cfg.DataDir, cfg.Logger)
	if err != nil {
		return Summary{}, err
	}
	defer db.close()
	// Every process waits at start for a database it cannot reach (a
	// restart, a partition) instead of exiting and being restarted.
	env := slices.Concat(cfg.Env, []string{"DATABASE_URL=" + db.processURL(), "SWITCHYARD_LEASE=" + lease.String(),
		"SWITCHYARD_WORKERS=2", "SWITCHYARD_DATABASE_WAIT=forever", secretEnv + "=" + chaosSecret, inboxSecretEnv + "=" + inboxSecret})
	if err := prepare(ctx, cfg, db, env); err != nil {
		return Summary{}, err
	}
	rec, dest, err := startDestination(ctx, cfg.Seed, db)
	if err != nil {
		return Summary{}, err
	}
	defer rec.Close()
	defer dest.Close()
	nats, err := startNATS(ctx, cfg.WorkDir, db)
	if err != nil {
		return Summary{}, err
	}
	defer nats.close()
	env = append(env, "SWITCHYARD_NATS_URL="+nats.url())
	ps := newProcs(cfg.Binary, cfg.WorkDir, env, dispatchers)
	for slot := range dispatchers {
		if err := ps.start(slot); err != nil {
			ps.stopAll(10 * time.Second)
			return Summary{}, err
		}
	}
	defer ps.stopAll(10 * time.Second)
	serves, urls, err := startServes(ctx, cfg.Binary, cfg.WorkDir, env)
	if err != nil {
		return Summary{}, err
	}
	defer serves.stopAll(10 * time.Second)
	r := &run{cfg: cfg, db: db, ps: ps, serves: serves, urls: urls, rec: rec, dest: dest, nats: nats}
	return r.traffic(ctx)
}

// prepare migrates the database with the binary and creates the business
// tables and the inbox source.
func prepare(ctx context.Context, cfg Config, db *database, env []string) error {
	if err := runOnce(ctx, cfg.Binary, env, filepath.Join(cfg.WorkDir, "migrate.log"), "migrate", "up"); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := db.admin.Exec(ctx, chaosTable); err != nil {
		return fmt.Errorf("create the business table: %w", err)
	}
	if _, err := db.admin.Exec(ctx, inboxSchema); err != nil {
		return fmt.Errorf("create the inbox's business side: %w", err)
	}
	return nil
}

// startDestination starts the recording receiver and the proxy in front of
// it, and registers the proxy as the run's webhook destination: retries
// from 100 ms to 30 s (long enough that an aggregate head may wait out a
// long backoff), and so many attempts that no message goes dead.
func startDestination(ctx context.Context, seed uint64, db *database) (*receiver, *proxy, error) {
	rec, err := newReceiver(seed, failRatio, 20*time.Millisecond)
	if err != nil {
		return nil, nil, fmt.Errorf("start the destination: %w", err)
	}
	dest, err := newProxy(rec.Addr())
	if err != nil {
		rec.Close()
		return nil, nil, fmt.Errorf("start the destination proxy: %w", err)
	}
	if _, err := db.admin.Exec(ctx, `INSERT INTO switchyard.destinations
		(name, kind, address, secret_ref, retry_base_ms, retry_cap_ms, max_attempts, timeout_ms)
		VALUES ($1, 'webhook', $2, $3, 100, 30000, 10000, 2000)`, destinationName, "http://"+dest.Addr(), secretEnv); err != nil {
		rec.Close()
		dest.Close()
		return nil, nil, fmt.Errorf("add the destination: %w", err)
	}
	return rec, dest, nil
}

// drain waits until no message of the run is pending (or drainTimeout),
// and returns how many still are.
func drain(ctx context.Context, db *database) (int, error) {
	deadline := time.Now().Add(drainTimeout)
	for {
		var pending int
		err := db.admin.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox WHERE destination = ANY($1) AND state = 'pending'`,
			destinations).Scan(&pending)
		if err == nil && pending == 0 || time.Now().After(deadline) {
			return pending, nil
		}
		if !pause(ctx, 250*time.Millisecond) {
			return pending, ctx.Err()
		}
	}
}
