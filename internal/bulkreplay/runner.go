package bulkreplay

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/service"
)

// DefaultBatchSize is Config.BatchSize's default.
const DefaultBatchSize = 500

// Config configures a Runner. Zero fields take the documented defaults.
type Config struct {
	// Owner names this runner in job leases. Default: a random name.
	Owner string
	// LeaseDuration is how long a job stays with this runner without
	// progress before another may resume it. Default 30 s.
	LeaseDuration time.Duration
	// Poll is how often an idle runner looks for a job, unless woken by
	// Wake. Default 1 s.
	Poll time.Duration
	// BatchSize is the most messages replayed in one transaction (and never
	// more than a job's rate per second). A batch costs a fixed handful of
	// statements whatever its size (outbox.ReplayBatch), so bigger batches
	// replay faster; they also hold their messages' locks longer and make a
	// cancel wait for the batch in progress. Default 500.
	BatchSize int
	// Changed, when set, is called after each committed batch, which put
	// the job's progress on the change feed. It must not block.
	Changed func()
	// Logger receives failures. Default: discard.
	Logger *slog.Logger
	// Workers work the jobs of kinds other than KindReplay (by kind):
	// bulk repair of reconciliation findings is action.RepairJobWorker.
	// A job of a kind this runner has no Worker for is left to a runner
	// that has one.
	Workers map[string]Worker
}

// Job kinds (switchyard.replay_jobs.kind).
const (
	KindReplay = "replay"
	KindRepair = "repair"
)

// Worker works the batches of one kind of job. Both methods run in the
// batch's transaction, which also records the batch's progress: a batch
// cut short (a crash, a lost lease, a cancel) leaves nothing, and is done
// again by the runner that resumes the job, so Work must derive whatever
// makes its effect idempotent from the job and the item.
type Worker interface {
	// Candidates is the next at most size items of job after
	// job.CursorID, up to job.UpperID, by ascending id.
	Candidates(ctx context.Context, tx pgx.Tx, job Job, size int) ([]int64, error)
	// Work does ids in tx: done counts the items it took effect on,
	// skipped those that needed nothing (done meanwhile by someone else).
	Work(ctx context.Context, tx pgx.Tx, job Job, ids []int64) (done, skipped int, err error)
}

func (c Config) withDefaults() Config {
	if c.Owner == "" {
		c.Owner = "bulkreplay-" + crand.Text()[:8]
	}
	if c.LeaseDuration <= 0 {
		c.LeaseDuration = 30 * time.Second
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Changed == nil {
		c.Changed = func() {}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	workers := map[string]Worker{KindReplay: replayWorker{}}
	for kind, w := range c.Workers {
		if kind != KindReplay {
			workers[kind] = w
		}
	}
	c.Workers = workers
	return c
}

// Runner runs bulk replay jobs, one at a time.
type Runner struct {
	cfg  Config
	pool *pgxpool.Pool
	wake chan struct{}
	life service.Lifecycle
}

// NewRunner returns a Runner; Start runs it.
func NewRunner(pool *pgxpool.Pool, cfg Config) *Runner {
	return &Runner{cfg: cfg.withDefaults(), pool: pool, wake: make(chan struct{}, 1)}
}

// Start runs the runner until Stop. It returns an error if already started.
func (r *Runner) Start(ctx context.Context) error {
	return r.life.Start(ctx, nil, r.loop)
}

// Stop ends the runner: a batch in progress is rolled back, and the job is
// resumed by any runner once its lease expires. It is idempotent.
func (r *Runner) Stop() { r.life.Stop() }

// Wake makes an idle runner look for a job now: call it after Start.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Runner) loop(ctx context.Context) {
	for ctx.Err() == nil {
		job, err := queries.New(r.pool).ReplayJobClaim(ctx, queries.ReplayJobClaimParams{
			Owner: r.cfg.Owner, LeaseSeconds: r.cfg.LeaseDuration.Seconds(), Kinds: slices.Collect(maps.Keys(r.cfg.Workers)),
		})
		switch {
		case err == nil:
			if err := r.run(ctx, job); err != nil && ctx.Err() == nil {
				r.cfg.Logger.Error("bulk replay job failed; it resumes when its lease expires",
					slog.String("job", job.ID.String()), slog.Any("error", err))
			}
			continue
		case !errors.Is(err, pgx.ErrNoRows) && ctx.Err() == nil:
			r.cfg.Logger.Warn("claim bulk replay job", slog.Any("error", err))
		}
		select {
		case <-ctx.Done():
		case <-r.wake:
		case <-time.After(r.cfg.Poll):
		}
	}
}

// run works through job's batches until it is done, cancelled, or its lease
// is lost, keeping to the job's rate.
func (r *Runner) run(ctx context.Context, job Job) error {
	w := r.cfg.Workers[job.Kind]
	batch := min(r.cfg.BatchSize, int(job.RatePerSec))
	perMessage := time.Second / time.Duration(job.RatePerSec)
	for {
		started := time.Now()
		n, state, err := r.batch(ctx, job, w, batch)
		if err != nil {
			return err
		}
		r.cfg.Logger.Debug("bulk replay batch", slog.String("job", job.ID.String()), slog.String("kind", job.Kind),
			slog.Int("replayed", n.replayed), slog.Int("skipped", n.skipped), slog.Duration("took", time.Since(started)))
		r.cfg.Changed()
		if n.replayed > 0 {
			r.wakeDispatchers(ctx)
		}
		if state != "running" {
			return nil
		}
		job.CursorID = n.cursor
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(started.Add(time.Duration(n.seen) * perMessage))):
		}
	}
}

// wakeDispatchers tells the dispatchers of every process, after the batch
// committed (never inside it: invariant 9), that replays are waiting. It is
// only a wake-up: they poll anyway, so a failure is logged, not fatal.
func (r *Runner) wakeDispatchers(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := outbox.Notify(ctx, r.pool); err != nil && ctx.Err() == nil {
		r.cfg.Logger.Warn("wake dispatchers after a bulk replay batch", slog.Any("error", err))
	}
}

type progress struct {
	seen, replayed, skipped int
	cursor                  int64
}

// batch replays the next batch of job's messages and records its progress
// in one transaction. state is the job's state after it, or "" when the
// lease was lost or the job cancelled (then nothing of the batch stays).
func (r *Runner) batch(ctx context.Context, job Job, w Worker, size int) (progress, string, error) {
	var p progress
	var state string
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		q := queries.New(tx)
		ids, err := w.Candidates(ctx, tx, job, size)
		if err != nil {
			return fmt.Errorf("next batch: %w", err)
		}
		p = progress{seen: len(ids), cursor: job.CursorID}
		if len(ids) > 0 {
			p.cursor = ids[len(ids)-1]
			if p.replayed, p.skipped, err = w.Work(ctx, tx, job, ids); err != nil {
				return err
			}
		}
		state, err = q.ReplayJobAdvance(ctx, queries.ReplayJobAdvanceParams{
			ID: job.ID, LeaseVersion: job.LeaseVersion, CursorID: p.cursor, Replayed: int64(p.replayed),
			Skipped: int64(p.skipped), LeaseSeconds: r.cfg.LeaseDuration.Seconds(), Last: len(ids) < size,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return errStopped
		}
		return err
	})
	if errors.Is(err, errStopped) {
		return p, "", nil
	}
	if err != nil {
		return p, "", fmt.Errorf("job %s: %w", job.ID, err)
	}
	return p, state, nil
}

// errStopped rolls back a batch whose job was cancelled or taken over.
var errStopped = errors.New("bulkreplay: job cancelled or lease lost")

// replayWorker works the jobs of KindReplay: dead messages matching the
// job's Filter, replayed set-based (outbox.ReplayBatch) with the job's
// request ids.
type replayWorker struct{}

func (replayWorker) Candidates(ctx context.Context, tx pgx.Tx, job Job, size int) ([]int64, error) {
	var f Filter
	if err := json.Unmarshal(job.Filter, &f); err != nil {
		return nil, fmt.Errorf("decode filter: %w", err)
	}
	p, err := f.params()
	if err != nil {
		return nil, err
	}
	p.FloorID, p.CeilingID, p.MaxRows = job.CursorID+1, job.UpperID, int32(size)
	return queries.New(tx).ReplayJobListCandidates(ctx, queries.ReplayJobListCandidatesParams(p))
}

// Work replays ids (one batch) in tx with the job's request ids and counts
// what it did.
func (replayWorker) Work(ctx context.Context, tx pgx.Tx, job Job, ids []int64) (replayed, skipped int, err error) {
	req := outbox.BatchRequest{Mode: outbox.ReplayMode(job.Mode), Actor: job.Actor, Reason: job.Reason,
		Job: job.ID, Messages: make([]outbox.MessageRequest, len(ids))}
	for i, id := range ids {
		req.Messages[i] = outbox.MessageRequest{MessageID: id, RequestID: requestID(job.ID, id)}
	}
	outcomes, err := outbox.ReplayBatch(ctx, tx, req)
	if err != nil {
		return 0, 0, fmt.Errorf("replay batch: %w", err)
	}
	for _, o := range outcomes {
		switch {
		case o.Err == nil:
			replayed++
		case errors.Is(o.Err, outbox.ErrReplayInFlight), errors.Is(o.Err, outbox.ErrNotDead), errors.Is(o.Err, outbox.ErrNotFound):
			// Someone replayed, discarded or removed it meanwhile: nothing to do.
			skipped++
		default:
			return 0, 0, fmt.Errorf("replay message %d: %w", o.MessageID, o.Err)
		}
	}
	return replayed, skipped, nil
}
