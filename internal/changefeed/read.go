package changefeed

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchyard/switchyard/internal/queries"
)

// readLoop reads the feed on every wake-up and every poll tick until ctx
// ends. While committed rows wait behind the watermark it reads again
// after SettleRetry, doubling up to PollInterval, so that a change held
// back by an unrelated transaction (which sends no NOTIFY when it ends)
// still arrives quickly.
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

// catchUp delivers every settled change after the cursor, batch by batch.
// held reports that committed changes wait behind the watermark.
func (l *Listener) catchUp(ctx context.Context) (held bool, err error) {
	for {
		after := l.Cursor() // only this goroutine moves it
		qctx, cancel := context.WithTimeout(ctx, l.cfg.QueryTimeout)
		rows, err := queries.New(l.pool).ChangeListAfter(qctx, queries.ChangeListAfterParams{
			AfterXid: xid8(after), AfterID: after.ID, BatchSize: int32(l.cfg.BatchSize),
		})
		cancel()
		if err != nil {
			return false, fmt.Errorf("changefeed: read after %s: %w", after, err)
		}
		batch := make([]Change, 0, len(rows))
		for _, r := range rows {
			if !r.Settled {
				// Unsettled rows sort after every settled one: stop here.
				held = true
				break
			}
			batch = append(batch, Change{
				Cursor: toCursor(r.Xid, r.ID), Kind: r.Kind, Subject: r.Subject,
				Payload: r.Payload, CreatedAt: r.CreatedAt,
			})
		}
		l.deliver(batch)
		if held || len(rows) < l.cfg.BatchSize {
			return held, nil
		}
	}
}

// deliver hands batch to every subscriber and moves the cursor past it, in
// one step under the lock, so that Subscribe's cursor and the batches a
// subscriber receives never overlap or leave a gap.
func (l *Listener) deliver(batch []Change) {
	if len(batch) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cursor = batch[len(batch)-1].Cursor
	for _, fn := range l.subs {
		fn(batch)
	}
}
