package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/queries"
)

// record commits one batch: the cursor, the counters, the unexamined
// ranges and the findings, fenced by the lease, with the change-feed rows
// a live page needs.
func (r *cycleRun) record(ctx context.Context, res batchResult, calls int64) error {
	counts := map[string]int64{}
	for _, d := range res.drifts {
		counts[d.kind]++
	}
	unexamined, err := json.Marshal(orEmpty(res.unexamined))
	if err != nil {
		return fmt.Errorf("reconcile: encode unexamined ranges: %w", err)
	}
	announced := false
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		q := queries.New(tx)
		if err := q.ReconcileCycleCommitAsync(ctx); err != nil {
			return fmt.Errorf("reconcile: commit a batch asynchronously: %w", err)
		}
		y, err := q.ReconcileCycleAdvance(ctx, queries.ReconcileCycleAdvanceParams{
			CursorKey: res.cursor, Examined: res.examined, InSync: res.inSync, Unknown: res.unknown,
			MissingRemote: counts[MissingRemote], MissingLocal: counts[MissingLocal], Mismatch: counts[Mismatch],
			RemoteCalls: calls, Unexamined: unexamined, LastError: res.lastError,
			CycleID: r.cycle.ID, CheckID: r.check.ID, LeaseVersion: r.check.LeaseVersion,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrLeaseLost
		}
		if err != nil {
			return fmt.Errorf("reconcile: advance cycle %d: %w", r.cycle.ID, err)
		}
		r.cycle = y
		drifted, err := upsertFindings(ctx, q, r.check.ID, y.ID, res.drifts)
		if err != nil {
			return err
		}
		if err := trackGroups(ctx, tx, r.check.Name, y.ID, drifted); err != nil {
			return err
		}
		var opened int64
		for _, g := range drifted {
			opened += g.Opened + g.Reopened
		}
		announced, err = r.announceBatch(ctx, tx, opened)
		return err
	})
	if err == nil && announced {
		_ = changefeed.Notify(ctx, r.pool) // a wake-up only
	}
	return err
}

// announceBatch appends the batch's change-feed rows: findings when some
// opened, progress at most once per feedInterval.
func (r *cycleRun) announceBatch(ctx context.Context, tx pgx.Tx, opened int64) (bool, error) {
	wrote := false
	if opened > 0 {
		if err := announce(ctx, tx, changefeed.KindReconcileFinding, r.check.Name, map[string]any{"opened": opened, "resolved": 0}); err != nil {
			return false, err
		}
		wrote = true
	}
	if now := time.Now(); now.Sub(r.fed) >= feedInterval || wrote {
		r.fed = now
		if err := announce(ctx, tx, changefeed.KindReconcileProgress, r.check.Name, map[string]any{"cycle": r.cycle.ID, "state": r.cycle.State}); err != nil {
			return false, err
		}
		wrote = true
	}
	return wrote, nil
}

// upsertFindings records a batch's drift, one row per (key, kind), and
// returns the kinds whose findings it opened or reopened, with counts.
func upsertFindings(ctx context.Context, q *queries.Queries, checkID, cycleID int64, drifts []drift) ([]queries.ReconcileFindingUpsertRow, error) {
	if len(drifts) == 0 {
		return nil, nil
	}
	p := queries.ReconcileFindingUpsertParams{CheckID: checkID, CycleID: cycleID}
	seen := map[[2]string]bool{}
	for _, d := range drifts {
		if seen[[2]string{d.key, d.kind}] {
			continue // a redelivery shares its original's key
		}
		seen[[2]string{d.key, d.kind}] = true
		diff, err := json.Marshal(d.diff)
		if err != nil || d.diff == nil {
			diff = []byte("{}")
		}
		p.Keys, p.Kinds, p.Refs, p.Diffs = append(p.Keys, d.key), append(p.Kinds, d.kind), append(p.Refs, d.ref), append(p.Diffs, diff)
	}
	rows, err := q.ReconcileFindingUpsert(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("reconcile: record %d findings: %w", len(p.Keys), err)
	}
	return rows, nil
}

// finish ends the cycle (complete or incomplete), resolves what a complete
// cycle no longer saw, and releases the check until its next cycle is due.
func (r *cycleRun) finish(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		q := queries.New(tx)
		y, err := q.ReconcileCycleFinish(ctx, queries.ReconcileCycleFinishParams{ID: r.cycle.ID, LeaseVersion: r.check.LeaseVersion})
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrLeaseLost
		}
		if err != nil {
			return fmt.Errorf("reconcile: finish cycle %d: %w", r.cycle.ID, err)
		}
		r.cycle = y
		var resolved int64
		if y.State == "complete" {
			if resolved, err = q.ReconcileFindingResolveUnseen(ctx, queries.ReconcileFindingResolveUnseenParams{CheckID: r.check.ID, CycleID: y.ID}); err != nil {
				return fmt.Errorf("reconcile: resolve the findings cycle %d no longer saw: %w", y.ID, err)
			}
		}
		if resolved > 0 {
			if err := announce(ctx, tx, changefeed.KindReconcileFinding, r.check.Name, map[string]any{"opened": 0, "resolved": resolved}); err != nil {
				return err
			}
		}
		if err := announce(ctx, tx, changefeed.KindReconcileProgress, r.check.Name, map[string]any{"cycle": y.ID, "state": y.State}); err != nil {
			return err
		}
		return wrap(q.ReconcileCheckRelease(ctx, queries.ReconcileCheckReleaseParams{ID: r.check.ID, LeaseVersion: r.check.LeaseVersion, Done: true}), "release %s", r.check.Name)
	})
	if err == nil {
		_ = changefeed.Notify(ctx, r.pool) // a wake-up only
	}
	return err
}

func orEmpty(rs []KeyRange) []KeyRange {
	if rs == nil {
		return []KeyRange{}
	}
	return rs
}
