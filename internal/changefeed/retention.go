package changefeed

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
)

// pruneBatch bounds each delete so that no statement holds locks for long.
const pruneBatch = 5000

// Prune deletes settled changes created before cutoff, oldest cursor first,
// in batches until none is left, and returns how many it deleted. Several
// processes may prune at once: the deletes are idempotent and the pruned
// cursor only rises.
func Prune(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time) (int64, error) {
	q := queries.New(pool)
	var total int64
	for {
		n, err := q.ChangePrune(ctx, queries.ChangePruneParams{Cutoff: cutoff, BatchSize: pruneBatch})
		total += n
		if err != nil {
			return total, fmt.Errorf("changefeed: prune: %w", err)
		}
		if n < pruneBatch {
			return total, nil
		}
	}
}

func (l *Listener) pruneLoop(ctx context.Context) {
	tick := time.NewTicker(l.cfg.PruneInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err := Prune(pctx, l.pool, time.Now().Add(-l.cfg.Retention))
		cancel()
		if err != nil && ctx.Err() == nil {
			l.cfg.Logger.Warn("change feed retention failed", slog.Any("error", err))
		}
	}
}

// Since returns the changes after `after` up to and including `upTo`, in
// cursor order, at most limit of them; a full result may be cut short. It
// is how a reader that was away (a reconnecting SSE client) learns what it
// missed. upTo must be a cursor a Listener has delivered, so that every
// change up to it is settled. ErrCursorExpired: changes after `after` may
// have been pruned.
func Since(ctx context.Context, pool *pgxpool.Pool, after, upTo Cursor, limit int) ([]Change, error) {
	q := queries.New(pool)
	rows, err := q.ChangeListRange(ctx, queries.ChangeListRangeParams{
		AfterXid: xid8(after), AfterID: after.ID, UpToXid: xid8(upTo), UpToID: upTo.ID, BatchSize: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("changefeed: read since %s: %w", after, err)
	}
	// Checked after the read: a prune that ran before the read has moved the
	// pruned cursor by now, and one that runs later cannot change what was
	// read.
	pruned, err := q.ChangePrunedCursor(ctx)
	if err != nil {
		return nil, fmt.Errorf("changefeed: read pruned cursor: %w", err)
	}
	if after.Compare(toCursor(pruned.Xid, pruned.ID)) < 0 {
		return nil, ErrCursorExpired
	}
	changes := make([]Change, len(rows))
	for i, r := range rows {
		changes[i] = Change{Cursor: toCursor(r.Xid, r.ID), Kind: r.Kind, Subject: r.Subject, Payload: r.Payload, CreatedAt: r.CreatedAt}
	}
	return changes, nil
}

// Since is the package function Since on the Listener's pool.
func (l *Listener) Since(ctx context.Context, after, upTo Cursor, limit int) ([]Change, error) {
	return Since(ctx, l.pool, after, upTo, limit)
}
