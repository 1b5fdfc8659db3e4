package changefeed

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/switchyard/switchyard/internal/queries"
)

// readLoop reads the feed on every wake-up and every poll tick until ctx
// ends. While the Listener is held back (more than MaxOpen transactions
// open below rows it could deliver) it reads again after SettleRetry,
// doubling up to PollInterval, because the end of an unrelated
// transaction sends no NOTIFY.
func (l *Listener) readLoop(ctx context.Context) {
	timer := time.NewTimer(l.cfg.PollInterval)
	defer timer.Stop()
	retry := l.cfg.SettleRetry
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		case <-timer.C:
		}
		held, err := l.catchUp(ctx)
		l.recordRead(held, err)
		if l.onRead != nil {
			l.onRead(held, err)
		}
		next := l.cfg.PollInterval
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			l.cfg.Logger.Warn("change feed read failed; retrying", slog.Any("error", err))
			next = min(time.Second, l.cfg.PollInterval)
		case held:
			next, retry = retry, min(2*retry, l.cfg.PollInterval)
		default:
			retry = l.cfg.SettleRetry
		}
		timer.Reset(next)
	}
}

// catchUp delivers every committed change the Listener has not delivered,
// batch by batch, each batch read in one snapshot. held reports that
// changes wait because too many transactions are open (MaxOpen).
func (l *Listener) catchUp(ctx context.Context) (held bool, err error) {
	for {
		pos := l.Position() // only this goroutine moves it
		qctx, cancel := context.WithTimeout(ctx, l.cfg.QueryTimeout)
		snap, err := readSnapshot(qctx, l.pool, pos, l.cfg.BatchSize)
		cancel()
		if err != nil {
			return false, fmt.Errorf("changefeed: read after %s: %w", pos, err)
		}
		batch, next, held := advance(pos, snap, MaxOpen)
		l.deliver(batch, next)
		if held || !snap.full(l.cfg.BatchSize) {
			return held, nil
		}
	}
}

// snapshot is one read of the feed in one database snapshot.
type snapshot struct {
	// inProgress are the transactions in progress, oldest first.
	inProgress []uint64
	// ended are the rows, after their Seen, of the open transactions that
	// have ended (committed; an aborted one has none), in cursor order, at
	// most the batch size.
	ended []Change
	// fresh are the committed rows after the position's cursor, in cursor
	// order, at most the batch size (none when endedCut).
	fresh []Change
	// endedCut: ended stopped at the batch size; its last transaction may
	// have more rows.
	endedCut bool
}

func (s snapshot) full(batchSize int) bool {
	return s.endedCut || len(s.fresh) >= batchSize
}

// readSnapshot reads, in one REPEATABLE READ snapshot, which transactions
// are in progress, the rows of the open transactions of pos that have
// ended, and the rows after pos.After. One snapshot matters: a row read
// by a later statement could belong to a transaction that an earlier one
// saw in progress, and would be delivered twice, or to one it never saw,
// and would be skipped.
func readSnapshot(ctx context.Context, db queries.DBTX, pos Position, batchSize int) (snapshot, error) {
	var s snapshot
	err := beginSnapshot(ctx, db, func(q *queries.Queries) error {
		row, err := q.ChangeSnapshotGet(ctx)
		if err != nil {
			return fmt.Errorf("read snapshot: %w", err)
		}
		s.inProgress = uint64s(row.InProgress)
		var ended openRange
		for _, o := range pos.Open {
			if _, running := slices.BinarySearch(s.inProgress, o.XID); !running {
				ended.add(o, 1<<63-1)
			}
		}
		if len(ended.xids) > 0 {
			rows, err := q.ChangeListOpen(ctx, ended.params(nil, batchSize))
			if err != nil {
				return fmt.Errorf("read ended transactions: %w", err)
			}
			if s.ended = changes(rows); len(s.ended) >= batchSize {
				s.endedCut = true
				return nil
			}
		}
		rows, err := q.ChangeListAfter(ctx, queries.ChangeListAfterParams{
			AfterXid: xid8(pos.After), AfterID: pos.After.ID, BatchSize: int32(batchSize),
		})
		s.fresh = changes(rows)
		return err
	})
	return s, err
}

// beginSnapshot runs fn in a read-only REPEATABLE READ transaction: every
// statement of fn sees one snapshot.
func beginSnapshot(ctx context.Context, db queries.DBTX, fn func(q *queries.Queries) error) error {
	beginner, ok := db.(interface {
		BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
	})
	if !ok {
		return fmt.Errorf("changefeed: %T cannot begin a transaction", db)
	}
	return pgx.BeginTxFunc(ctx, beginner, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return fn(queries.New(tx)) })
}

// advance decides, from the position pos and one snapshot s, what to
// deliver: first the rows of open transactions that ended, then the rows
// after pos.After, each with the Position after it (its event id), and the
// Position after them all (which also forgets ended transactions that
// wrote nothing). A transaction still in progress below a delivered row
// joins the open ones. held reports that rows were left because more than
// maxOpen transactions would be open.
func advance(pos Position, s snapshot, maxOpen int) (batch []Change, next Position, held bool) {
	running := func(xid uint64) bool { _, ok := slices.BinarySearch(s.inProgress, xid); return ok }
	open := slices.Clone(pos.Open)
	for i, ch := range s.ended {
		x := ch.Cursor.XID
		last := i == len(s.ended)-1
		// All of x's rows are in: the next row is another transaction's,
		// or this was the last row and the read was not cut short.
		done := (!last && s.ended[i+1].Cursor.XID != x) || (last && !s.endedCut)
		open = slices.DeleteFunc(open, func(o Open) bool {
			return !running(o.XID) && (o.XID < x || (o.XID == x && done))
		})
		if !done {
			if j := slices.IndexFunc(open, func(o Open) bool { return o.XID == x }); j >= 0 {
				open[j].Seen = ch.Cursor.ID
			}
		}
		ch.Position = Position{After: pos.After, Open: slices.Clone(open)}
		batch = append(batch, ch)
	}
	if s.endedCut {
		return batch, Position{After: pos.After, Open: open}, false
	}
	open = slices.DeleteFunc(open, func(o Open) bool { return !running(o.XID) })
	next = Position{After: pos.After, Open: open}
	// Transactions in progress at or after the cursor's: each becomes open
	// once a delivered row is after it. One at the cursor's own xid (a
	// start position, (xmax, 0), whose xid was taken since) has the rows
	// up to the cursor already.
	above := s.inProgress[firstAtOrAbove(s.inProgress, pos.After.XID):]
	k := 0
	for _, ch := range s.fresh {
		for k < len(above) && above[k] < ch.Cursor.XID {
			k++
		}
		if len(open)+k > maxOpen {
			return batch, next, true
		}
		ch.Position = Position{After: ch.Cursor, Open: slices.Clone(open)}
		for _, x := range above[:k] {
			o := Open{XID: x}
			if x == pos.After.XID {
				o.Seen = pos.After.ID
			}
			ch.Position.Open = append(ch.Position.Open, o)
		}
		batch = append(batch, ch)
		next = ch.Position
	}
	return batch, next, false
}

// firstAtOrAbove returns the index of the first of xids (ascending) at or
// above x.
func firstAtOrAbove(xids []uint64, x uint64) int {
	i, _ := slices.BinarySearch(xids, x)
	return i
}

// deliver hands batch to every subscriber and moves the position to next,
// in one step under the lock, so that Subscribe's position and the
// batches a subscriber receives never overlap or leave a gap.
func (l *Listener) deliver(batch []Change, next Position) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pos = next
	l.status.open(next)
	if len(batch) == 0 {
		return
	}
	for _, fn := range l.subs {
		fn(batch)
	}
}

// openRange collects (xid, seen, upto) triples for ChangeListOpen.
type openRange struct {
	xids       []pgtype.Uint64
	seen, upto []int64
}

func (r *openRange) add(o Open, upto int64) {
	r.xids = append(r.xids, pgtype.Uint64{Uint64: o.XID, Valid: true})
	r.seen = append(r.seen, o.Seen)
	r.upto = append(r.upto, upto)
}

func (r openRange) params(f *Filter, limit int) queries.ChangeListOpenParams {
	p := queries.ChangeListOpenParams{Xids: r.xids, Seen: r.seen, Upto: r.upto, Kinds: []string{}, Subjects: []string{}, BatchSize: int32(limit)}
	if f != nil {
		p.Kinds, p.Subjects = nonNilSlice(f.Kinds), nonNilSlice(f.Subjects)
	}
	return p
}

func changes(rows []queries.SwitchyardChange) []Change {
	out := make([]Change, len(rows))
	for i, r := range rows {
		out[i] = Change{Cursor: toCursor(r.Xid, r.ID), Kind: r.Kind, Subject: r.Subject, Payload: r.Payload, CreatedAt: r.CreatedAt}
	}
	return out
}

func uint64s(xids []pgtype.Uint64) []uint64 {
	out := make([]uint64, len(xids))
	for i, x := range xids {
		out[i] = x.Uint64
	}
	return out
}
