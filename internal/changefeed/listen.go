package changefeed

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchyard/switchyard/internal/queries"
)

// listenLoop keeps one LISTEN connection open until ctx ends, and wakes the
// reader after every (re)connect (to catch up on what happened while it was
// down) and on every notification. A lost connection is re-opened with a
// backoff between ReconnectMin and ReconnectMax; meanwhile the reader's
// polling covers.
//
// It is written here rather than taken from pgxlisten because the reader
// must run apart from the connection (so wake-ups coalesce and a slow read
// never delays LISTEN), and reconnects back off rather than wait a fixed
// delay.
func (l *Listener) listenLoop(ctx context.Context) {
	delay := l.cfg.ReconnectMin
	for ctx.Err() == nil {
		start := time.Now()
		err := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > l.cfg.ReconnectMax {
			delay = l.cfg.ReconnectMin // it was up for a while: start over
		}
		l.cfg.Logger.Warn("change feed LISTEN connection lost; reconnecting",
			slog.Any("error", err), slog.Duration("after", delay))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, l.cfg.ReconnectMax)
	}
}

// listen opens the connection, LISTENs, wakes the reader, then waits for
// notifications until the connection fails or ctx ends.
func (l *Listener) listen(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, l.cfg.QueryTimeout)
	conn, err := l.cfg.Connect(cctx)
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	lctx, cancel := context.WithTimeout(ctx, l.cfg.QueryTimeout)
	err = queries.New(conn).ChangeListen(lctx)
	cancel()
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Only now, with LISTEN in place, is a catch-up sure to miss nothing:
	// a change committed after it is read or notified.
	l.Wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		l.Wake()
	}
}
