package msgfilter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/queries"
)

// CommitSkew is how far created_at (the enqueuing transaction's start) may
// lag behind id order: a transaction that stays open this long before it
// inserts could fall outside the id range of its time.
const CommitSkew = 5 * time.Minute

// NoCeiling is IDRange's ceiling when the range has no upper end.
const NoCeiling = 1<<63 - 1

// IDRange maps a created_at range (from <= created_at < to; nil: open) to
// bounds on id, floor <= id <= ceiling, so that a list or a bulk replay
// job under a time filter walks only the ids of that range; the exact
// created_at filter still applies inside it. It reads the primary key
// (about 20 probes per bound for a million rows), never the table. Without
// a bound: 0 and NoCeiling.
func IDRange(ctx context.Context, q *queries.Queries, from, to *time.Time) (floor, ceiling int64, err error) {
	floor, ceiling = 0, NoCeiling
	if from == nil && to == nil {
		return floor, ceiling, nil
	}
	b, err := q.ConsoleMessageIDBoundsGet(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read the id bounds: %w", err)
	}
	if from != nil {
		if floor, err = firstIDAt(ctx, q, b.Low, b.High, from.Add(-CommitSkew)); err != nil {
			return 0, 0, err
		}
	}
	if to != nil {
		if ceiling, err = firstIDAt(ctx, q, b.Low, b.High+1, to.Add(CommitSkew)); err != nil {
			return 0, 0, err
		}
	}
	return floor, ceiling, nil
}

// firstIDAt finds, by binary search over the primary key, the first id in
// [low, high] whose message was created at or after t; high when none is.
func firstIDAt(ctx context.Context, q *queries.Queries, low, high int64, t time.Time) (int64, error) {
	for low < high {
		mid := low + (high-low)/2
		row, err := q.ConsoleMessageGetAtOrAfter(ctx, mid)
		if errors.Is(err, pgx.ErrNoRows) { // no message at or above mid
			high = mid
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("map a time to an id: %w", err)
		}
		if row.CreatedAt.Before(t) {
			low = row.ID + 1
		} else {
			high = mid
		}
	}
	return low, nil
}
