package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/service"
)

// Config configures a Runner. Zero values take the documented defaults.
type Config struct {
	// Owner names this runner in the lease (an instance id). Required.
	Owner string
	// Poll is how often an idle runner looks for a due check; default 1 s.
	Poll time.Duration
	// Kinds adds check kinds beyond "delivery" and "table" (or replaces
	// them, by name).
	Kinds map[string]Kind
	// Client is the HTTP client of the built-in kinds; default a client
	// without a timeout of its own (each call gets the check's).
	Client *http.Client
	// Attempts is how often a batch's remote call is tried; default 3.
	Attempts int
	// Backoff is the first pause between attempts (doubling); default 200 ms.
	Backoff time.Duration
	// MaxFailedBatches is how many batches in a row the remote may fail
	// before the cycle gives up and reports the rest not examined;
	// default 3.
	MaxFailedBatches int
	Logger           *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.Client == nil {
		c.Client = &http.Client{}
	}
	if c.Attempts <= 0 {
		c.Attempts = 3
	}
	if c.Backoff <= 0 {
		c.Backoff = 200 * time.Millisecond
	}
	if c.MaxFailedBatches <= 0 {
		c.MaxFailedBatches = 3
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	kinds := maps.Clone(builtinKinds)
	maps.Copy(kinds, c.Kinds)
	c.Kinds = kinds
	return c
}

// Runner runs the cycles of due checks, one check at a time, holding each
// check's lease while it runs: any number of runners (instances) share the
// checks, and each check has at most one runner at a time. Its Start and
// Stop are a service.Lifecycle's, like the dispatcher's and the bulk
// replay runner's.
type Runner struct {
	pool *pgxpool.Pool
	cfg  Config
	life service.Lifecycle
}

// NewRunner returns a runner; Start runs it.
func NewRunner(pool *pgxpool.Pool, cfg Config) *Runner {
	return &Runner{pool: pool, cfg: cfg.withDefaults()}
}

// errNoOwner refuses to start a runner without a lease owner name.
var errNoOwner = errors.New("reconcile: a runner needs an owner name")

// Start runs the runner in the background until Stop (ctx's values are
// kept, its cancellation is not: see internal/service). It returns an
// error without an Owner, or if already started (service.ErrStarted).
func (r *Runner) Start(ctx context.Context) error {
	return r.life.Start(ctx, func(context.Context) error {
		if r.cfg.Owner == "" {
			return errNoOwner
		}
		return nil
	}, r.loop)
}

// Stop stops the runner and waits for it. A cycle it was running stays
// running; its lease is given back, so another runner resumes it at once.
// Stop is idempotent.
func (r *Runner) Stop() { r.life.Stop() }

func (r *Runner) loop(ctx context.Context) {
	t := time.NewTicker(r.cfg.Poll)
	defer t.Stop()
	for {
		for ctx.Err() == nil {
			ran, err := r.runOnce(ctx, true)
			if err != nil && ctx.Err() == nil {
				r.cfg.Logger.ErrorContext(ctx, "reconcile: cycle failed", slog.Any("error", err))
			}
			if !ran || err != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunOnce takes the lease of one due check, if any, and runs its cycle to
// the end (or resumes the cycle a dead runner left). ran is false when no
// check was due. When ctx ends first, RunOnce returns like a crashed
// process: the cycle stays running and the lease is left to expire, after
// which another runner resumes from the persisted cursor. (A started
// Runner's Stop gives the lease back instead.)
func (r *Runner) RunOnce(ctx context.Context) (ran bool, err error) {
	return r.runOnce(ctx, false)
}

func (r *Runner) runOnce(ctx context.Context, releaseOnStop bool) (ran bool, err error) {
	row, err := queries.New(r.pool).ReconcileCheckLease(ctx, r.cfg.Owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reconcile: lease a due check: %w", err)
	}
	c := checkFromRow(row)
	err = r.runCycle(ctx, c)
	stopped := ctx.Err() != nil
	if err != nil && !errors.Is(err, ErrLeaseLost) && (releaseOnStop || !stopped) {
		r.release(c, stopped)
	}
	return true, err
}

// failureDelay is how long a check whose cycle failed waits before it is
// tried again (its cycle stays running, and is resumed then).
const failureDelay = time.Minute

// release gives the lease of c back after a failure or a stop, with its
// own short deadline (ctx may be over).
func (r *Runner) release(c Check, stopped bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A stopped cycle is due again at once, for the next runner; a failed
	// one after failureDelay.
	delay := failureDelay
	if stopped {
		delay = 0
	}
	err := queries.New(r.pool).ReconcileCheckRelease(ctx, queries.ReconcileCheckReleaseParams{ID: c.ID, LeaseVersion: c.LeaseVersion, DelayMs: delay.Milliseconds()})
	if err != nil {
		r.cfg.Logger.Warn("reconcile: release a check", slog.String("check", c.Name), slog.Any("error", err))
	}
}

func (r *Runner) runCycle(ctx context.Context, c Check) error {
	if err := c.Validate(r.cfg.Kinds); err != nil {
		return err
	}
	src, remote, err := r.cfg.Kinds[c.Kind](ctx, r.pool, r.cfg.Client, c)
	if err != nil {
		return fmt.Errorf("reconcile: build check %s: %w", c.Name, err)
	}
	y, err := openCycle(ctx, r.pool, c, src)
	if err != nil {
		return err
	}
	run := &cycleRun{
		pool: r.pool, log: r.cfg.Logger, check: c, src: src, cycle: y, maxFails: r.cfg.MaxFailedBatches,
		remote: newGuardedRemote(remote, c.RemoteRate, c.Timeout, r.cfg.Attempts, r.cfg.Backoff),
	}
	if rg, ok := src.(Ranged); ok {
		run.ranged = rg
	}
	return run.run(ctx)
}
