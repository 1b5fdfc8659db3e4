package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/queries"
)

// ErrLeaseLost means another runner took the check over: this runner's
// writes were refused (fencing) and it stopped.
var ErrLeaseLost = errors.New("reconcile: the check's lease was taken over")

// feedInterval is how often a running cycle announces its progress on
// the change feed: often enough for a live progress bar, rarely enough
// that a fast cycle does not flood the feed.
const feedInterval = time.Second

// cycleRun is one runner's run of one cycle of one check. It is used by
// one goroutine.
type cycleRun struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	check    Check
	src      Source
	ranged   Ranged // nil unless src is Ranged
	remote   *guardedRemote
	maxFails int
	cycle    queries.SwitchyardReconcileCycle
	fails    int       // consecutive batches the remote could not answer
	fed      time.Time // last progress announcement
	// ahead delivers the page read ahead (prefetch.go); nil: none.
	ahead chan pageResult
}

// openCycle resumes the check's running cycle or starts a new one with its
// bounds fixed now.
func openCycle(ctx context.Context, pool *pgxpool.Pool, c Check, src Source) (queries.SwitchyardReconcileCycle, error) {
	q := queries.New(pool)
	running, err := q.ReconcileCycleGetRunning(ctx, c.ID)
	if err == nil {
		y, err := q.ReconcileCycleResume(ctx, queries.ReconcileCycleResumeParams{ID: running.ID, LeaseVersion: c.LeaseVersion})
		if errors.Is(err, pgx.ErrNoRows) {
			return y, ErrLeaseLost
		}
		return y, wrap(err, "resume cycle %d", running.ID)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return running, fmt.Errorf("reconcile: running cycle of %s: %w", c.Name, err)
	}
	var y queries.SwitchyardReconcileCycle
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		qt := queries.New(tx)
		started, err := qt.ReconcileCycleStart(ctx, queries.ReconcileCycleStartParams{CheckID: c.ID, LeaseVersion: c.LeaseVersion})
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrLeaseLost
		}
		if err != nil {
			return fmt.Errorf("reconcile: start a cycle of %s: %w", c.Name, err)
		}
		upper, estimate, err := src.Bounds(ctx, *started.Since)
		if err != nil {
			return err
		}
		y, err = qt.ReconcileCycleSetBounds(ctx, queries.ReconcileCycleSetBoundsParams{ID: started.ID, UpperKey: upper, Estimate: estimate})
		if err != nil {
			return fmt.Errorf("reconcile: bounds of cycle %d: %w", started.ID, err)
		}
		return announce(ctx, tx, changefeed.KindReconcileProgress, c.Name, map[string]any{"cycle": y.ID, "state": y.State})
	})
	if err == nil {
		_ = changefeed.Notify(ctx, pool) // a wake-up only: a lost one delays a page, loses nothing
	}
	return y, err
}

// run walks the cycle from its cursor to its upper bound, one batch per
// transaction, and finishes it. It returns ctx's error when stopped (the
// cycle stays running, resumable) and ErrLeaseLost when fenced out.
func (r *cycleRun) run(ctx context.Context) error {
	defer r.dropAhead()
	for r.cycle.UpperKey != nil {
		done, err := r.batch(ctx)
		if err != nil {
			return err
		}
		if done {
			break
		}
	}
	return r.finish(ctx)
}

// batchResult is what one batch found, as recorded.
type batchResult struct {
	cursor     *string
	examined   int64
	inSync     int64
	unknown    int64
	drifts     []drift
	unexamined []KeyRange
	lastError  string
}

// batch examines the next page of keys and records it; done: the cycle
// has nothing more to examine.
func (r *cycleRun) batch(ctx context.Context) (done bool, err error) {
	after, upper := r.cycle.CursorKey, *r.cycle.UpperKey
	items, err := r.page(ctx, after, upper)
	if err != nil {
		return false, err
	}
	final := len(items) < r.check.BatchSize || items[len(items)-1].Cursor == upper
	if !final {
		r.readAhead(ctx, &items[len(items)-1].Cursor, upper)
	}
	if len(items) == 0 && r.ranged == nil {
		return true, nil
	}
	res := batchResult{cursor: after, examined: int64(len(items))}
	if len(items) > 0 {
		res.cursor = &items[len(items)-1].Cursor
	}
	calls := r.remote.calls
	lerr := r.examine(ctx, items, after, final, &res)
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if lerr != nil {
		final = r.unknown(lerr, after, upper, final, &res)
	}
	return final, r.record(ctx, res, r.remote.calls-calls)
}

// examine asks the remote about items (and, for a ranged source, the
// batch's key range) and classifies them into res. An error is the
// remote's (after its retries) or the local existence check's.
func (r *cycleRun) examine(ctx context.Context, items []Item, after *string, final bool, res *batchResult) error {
	req := LookupRequest{Keys: distinctKeys(items)}
	var exists func(context.Context, string) (bool, error)
	if r.ranged != nil {
		req.Range, exists = &KeyRange{After: after}, r.ranged.Exists
		if !final {
			req.Range.Through = res.cursor
		}
	}
	entities, err := r.remote.lookup(ctx, req)
	if err != nil {
		return err
	}
	r.fails = 0
	res.inSync, res.drifts, err = classify(ctx, items, entities, exists)
	return err
}

// unknown records a batch that could not be checked: its keys are
// unknown and its range unexamined. After maxFails such batches in a row
// the rest of the cycle is reported unexamined too, and the cycle ends
// (final).
func (r *cycleRun) unknown(err error, after *string, upper string, final bool, res *batchResult) bool {
	r.fails++
	r.log.Warn("reconcile: remote lookup failed", "check", r.check.Name, "cycle", r.cycle.ID, "fails", r.fails, "err", err)
	res.unknown, res.lastError, res.inSync, res.drifts = res.examined, err.Error(), 0, nil
	res.unexamined = append(res.unexamined, KeyRange{After: after, Through: orUpper(res.cursor, upper, final)})
	if r.fails >= r.maxFails && !final {
		// The remote is down: stop asking; the rest is reported not
		// examined rather than waited for.
		res.unexamined = append(res.unexamined, KeyRange{After: res.cursor, Through: &upper})
		return true
	}
	return final
}

// orUpper is the end of a batch's range: its last cursor, or the cycle's
// upper bound for the final batch (which covers the tail).
func orUpper(cursor *string, upper string, final bool) *string {
	if final || cursor == nil {
		return &upper
	}
	return cursor
}

func distinctKeys(items []Item) []string {
	seen := make(map[string]bool, len(items))
	keys := make([]string, 0, len(items))
	for _, it := range items {
		if !seen[it.Key] {
			seen[it.Key] = true
			keys = append(keys, it.Key)
		}
	}
	return keys
}

func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("reconcile: "+format+": %w", append(args, err)...)
}

func announce(ctx context.Context, tx pgx.Tx, kind, subject string, payload map[string]any) error {
	raw, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("reconcile: encode change: %w", err)
	}
	return changefeed.Append(ctx, tx, changefeed.Change{Kind: kind, Subject: subject, Payload: raw})
}
