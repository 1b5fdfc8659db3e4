package changefeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
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

// Filter narrows what Since returns: changes of these kinds (none: every
// kind) and of these subjects (none: every subject).
type Filter struct {
	Kinds, Subjects []string
}

// ErrNotWithin means Since was asked for the changes between two
// positions of which the first includes a change that the second may not:
// the reader at upTo is behind the one at from.
var ErrNotWithin = errors.New("changefeed: position not within the reader's")

// Since returns the changes that upTo includes and from does not, that
// match f: first those of from's open transactions (in cursor order), then
// the rest in cursor order; each with the Position after it on the way from
// from to upTo, so that a reader that stops after any of them can resume
// from its Position. At most limit of them; a full result may be cut
// short. It is how a reader that was away (a reconnecting SSE client)
// learns what it missed. upTo must be a Position a Listener delivered, so
// that every change it includes is committed. ErrCursorExpired: changes
// from does not include may have been pruned; ErrNotWithin: from includes
// a change upTo lacks (upTo's reader is behind).
//
// Each read is a bounded walk of one index per kind (and subject) of f,
// whatever the other kinds wrote (EXPLAIN.md): resume works across the
// whole retention for any filter, as long as what the filter missed fits
// the limit.
func Since(ctx context.Context, pool *pgxpool.Pool, from, upTo Position, f Filter, limit int) ([]Change, error) {
	q := queries.New(pool)
	if err := within(ctx, q, from, upTo); err != nil {
		return nil, err
	}
	changes, err := sinceOpen(ctx, q, from, upTo, f, limit)
	if err != nil {
		return nil, err
	}
	if len(changes) < limit {
		rows, err := listRange(ctx, q, from.After, upTo, f, limit-len(changes))
		if err != nil {
			return nil, fmt.Errorf("changefeed: read since %s: %w", from, err)
		}
		for _, ch := range rows {
			ch.Position = upTo.upTo(ch.Cursor)
			changes = append(changes, ch)
		}
	}
	// Checked after the reads: a prune that ran before them has moved the
	// pruned cursor by now, and one that runs later cannot change what was
	// read.
	pruned, err := q.ChangePrunedCursorGet(ctx)
	if err != nil {
		return nil, fmt.Errorf("changefeed: read pruned cursor: %w", err)
	}
	if expired(from, toCursor(pruned.Xid, pruned.ID)) {
		return nil, ErrCursorExpired
	}
	return changes, nil
}

// within returns nil if upTo includes every change from includes, and
// ErrNotWithin if not. Positions of two instances (or of one, read at two
// moments) often differ in transactions only: upTo may still wait for a
// transaction that from's reader saw end. If it ended without writing to
// the feed (the usual case: an unrelated transaction), from is within
// upTo all the same; one read of those transactions' rows tells.
func within(ctx context.Context, q *queries.Queries, from, upTo Position) error {
	if from.Within(upTo) {
		return nil
	}
	if from.After.Compare(upTo.After) > 0 {
		return ErrNotWithin
	}
	// The rows of upTo's open transactions that from claims: after upTo's
	// Seen, up to from's Seen (or all of them up to from's cursor).
	var claimed openRange
	for _, o := range upTo.Open {
		if o.XID > from.After.XID {
			break
		}
		upto := int64(1<<63 - 1)
		if fo, ok := from.open(o.XID); ok {
			upto = fo.Seen
		} else if o.XID == from.After.XID {
			upto = from.After.ID
		}
		if upto > o.Seen {
			claimed.add(o, upto)
		}
	}
	if len(claimed.xids) == 0 {
		return nil
	}
	rows, err := q.ChangeListOpen(ctx, claimed.params(nil, 1))
	if err != nil {
		return fmt.Errorf("changefeed: compare %s with %s: %w", from, upTo, err)
	}
	if len(rows) > 0 {
		return ErrNotWithin
	}
	return nil
}

// expired reports whether retention may have pruned a change that from
// does not include: every pruned change is at or before pruned. An open
// transaction at or before it has ended and its rows may be gone.
func expired(from Position, pruned Cursor) bool {
	if from.After.Compare(pruned) < 0 {
		return true
	}
	return len(from.Open) > 0 && from.Open[0].XID <= pruned.XID
}

// sinceOpen returns the rows upTo includes of the transactions open at
// from, each with the Position after it (from, with the transaction's Seen
// moved to the row).
func sinceOpen(ctx context.Context, q *queries.Queries, from, upTo Position, f Filter, limit int) ([]Change, error) {
	var open openRange
	for _, o := range from.Open {
		upto := int64(1<<63 - 1)
		if uo, ok := upTo.open(o.XID); ok {
			upto = uo.Seen
		}
		if upto > o.Seen {
			open.add(o, upto)
		}
	}
	if len(open.xids) == 0 {
		return nil, nil
	}
	rows, err := q.ChangeListOpen(ctx, open.params(&f, limit))
	if err != nil {
		return nil, fmt.Errorf("changefeed: read open transactions of %s: %w", from, err)
	}
	out := changes(rows)
	pos := Position{After: from.After, Open: slices.Clone(from.Open)}
	for i := range out {
		j := slices.IndexFunc(pos.Open, func(o Open) bool { return o.XID == out[i].Cursor.XID })
		pos.Open[j].Seen = out[i].Cursor.ID
		out[i].Position = Position{After: pos.After, Open: slices.Clone(pos.Open)}
	}
	return out, nil
}

// listRange reads the changes in (after, upTo.After] that upTo includes
// and f matches, through the index that serves f.
func listRange(ctx context.Context, q *queries.Queries, after Cursor, upTo Position, f Filter, limit int) ([]Change, error) {
	var xids []pgtype.Uint64
	var seen []int64
	for _, o := range upTo.Open {
		xids = append(xids, pgtype.Uint64{Uint64: o.XID, Valid: true})
		seen = append(seen, o.Seen)
	}
	xids, seen = nonNilSlice(xids), nonNilSlice(seen)
	var rows []queries.SwitchyardChange
	var err error
	switch {
	case len(f.Subjects) > 0:
		kinds := f.Kinds
		if len(kinds) == 0 {
			kinds = Kinds
		}
		rows, err = q.ChangeListRangeBySubject(ctx, queries.ChangeListRangeBySubjectParams{
			Kinds: kinds, Subjects: f.Subjects, AfterXid: xid8(after), AfterID: after.ID,
			UpToXid: xid8(upTo.After), UpToID: upTo.After.ID, OpenXids: xids, OpenSeen: seen, BatchSize: int32(limit),
		})
	case len(f.Kinds) > 0:
		rows, err = q.ChangeListRangeByKind(ctx, queries.ChangeListRangeByKindParams{
			Kinds: f.Kinds, AfterXid: xid8(after), AfterID: after.ID,
			UpToXid: xid8(upTo.After), UpToID: upTo.After.ID, OpenXids: xids, OpenSeen: seen, BatchSize: int32(limit),
		})
	default:
		rows, err = q.ChangeListRange(ctx, queries.ChangeListRangeParams{
			AfterXid: xid8(after), AfterID: after.ID,
			UpToXid: xid8(upTo.After), UpToID: upTo.After.ID, OpenXids: xids, OpenSeen: seen, BatchSize: int32(limit),
		})
	}
	return changes(rows), err
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Since is the package function Since on the Listener's pool.
func (l *Listener) Since(ctx context.Context, from, upTo Position, f Filter, limit int) ([]Change, error) {
	return Since(ctx, l.pool, from, upTo, f, limit)
}
