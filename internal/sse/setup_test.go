package sse

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testlog"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type bundle struct {
	pool     *pgxpool.Pool
	listener *changefeed.Listener
	hub      *Hub
	srv      *httptest.Server
}

// setup starts a listener on a fresh database, a hub on it and an HTTP
// server serving the hub, all stopped when the test ends.
func setup(t *testing.T, cfg Config) bundle {
	t.Helper()
	pool := dbtest.New(t)
	l := changefeed.NewListener(pool, changefeed.Config{PollInterval: 100 * time.Millisecond, SettleRetry: 5 * time.Millisecond, Logger: testlog.New(t)})
	require.NoError(t, l.Start(context.Background()))
	t.Cleanup(l.Stop)
	if cfg.Logger == nil {
		cfg.Logger = testlog.New(t)
	}
	hub := New(l, cfg)
	srv := httptest.NewServer(hub)
	t.Cleanup(func() {
		hub.Close() // streams end first, so Close of the server does not wait
		srv.Close()
	})
	return bundle{pool: pool, listener: l, hub: hub, srv: srv}
}

// commit appends one change per subject of kind in one transaction and
// notifies.
func (b bundle) commit(t *testing.T, kind string, subjects ...string) {
	t.Helper()
	require.NoError(t, b.tryCommit(kind, subjects...))
}

// tryCommit is commit for goroutines other than the test's.
func (b bundle) tryCommit(kind string, subjects ...string) error {
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		for _, s := range subjects {
			if err := changefeed.Append(ctx, tx, changefeed.Change{Kind: kind, Subject: s}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return changefeed.Notify(ctx, b.pool)
}

// cursors are the cursors of every change in the feed. The newest by
// cursor is not the last one delivered: a transaction with a smaller xid
// may commit after one with a larger, and its rows then come later (the
// position lists it as open until they do). A reader has everything once
// its position has every one of these.
func (b bundle) cursors(t *testing.T) []changefeed.Cursor {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), "SELECT xid::text::bigint, id FROM switchyard.changes")
	require.NoError(t, err)
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (changefeed.Cursor, error) {
		var c changefeed.Cursor
		return c, r.Scan(&c.XID, &c.ID)
	})
	require.NoError(t, err)
	require.NotEmpty(t, all)
	return all
}

// hasAll reports whether p has every one of cursors.
func hasAll(p changefeed.Position, cursors []changefeed.Cursor) bool {
	for _, c := range cursors {
		if !p.Has(c) {
			return false
		}
	}
	return true
}

// waitCaughtUp waits until the hub has published every change.
func (b bundle) waitCaughtUp(t *testing.T) {
	t.Helper()
	want := b.cursors(t)
	testwait.Until(t, 10*time.Second, fmt.Sprintf("the hub at all %d changes", len(want)), func() bool {
		b.hub.mu.Lock()
		defer b.hub.mu.Unlock()
		return hasAll(b.hub.pos, want)
	})
}

// hubPosition is the hub's position: the id of its control events.
func (b bundle) hubPosition() changefeed.Position {
	b.hub.mu.Lock()
	defer b.hub.mu.Unlock()
	return b.hub.pos
}

// sseEvent is one parsed event, or a comment when comment is set.
type sseEvent struct {
	id, name, data string
	comment        string
}

// tclient is a test SSE client reading into a channel.
type tclient struct {
	events chan sseEvent
	resp   *http.Response
	cancel context.CancelFunc
	done   chan struct{}
}

// connect opens a stream; lastEventID "" sends none. The stream is closed
// when the test ends. slow, if set, delays after each event read.
func connect(t *testing.T, url, lastEventID string, slow time.Duration) *tclient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	c := &tclient{events: make(chan sseEvent, 10000), resp: resp, cancel: cancel, done: make(chan struct{})}
	go c.read(slow)
	t.Cleanup(c.close)
	return c
}

func (c *tclient) close() {
	c.cancel()
	<-c.done
	c.resp.Body.Close()
}

func (c *tclient) read(slow time.Duration) {
	defer close(c.done)
	defer close(c.events)
	r := bufio.NewReader(c.resp.Body)
	var ev sseEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev != (sseEvent{}) {
				c.events <- ev
				if slow > 0 {
					time.Sleep(slow) // a slow reader, on purpose
				}
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
			c.events <- sseEvent{comment: strings.TrimSpace(line[1:])}
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
}

// next returns the next event that is not a comment (and not the retry
// field's empty event), failing after limit.
func (c *tclient) next(t *testing.T, limit time.Duration) sseEvent {
	t.Helper()
	deadline := time.After(limit)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				t.Fatal("stream ended")
			}
			if ev.comment == "" && ev.name != "" {
				return ev
			}
		case <-deadline:
			t.Fatalf("no event within %v", limit)
		}
	}
}

// until collects events up to the first whose position has every one of
// cursors.
func (c *tclient) until(t *testing.T, cursors []changefeed.Cursor, limit time.Duration) []sseEvent {
	t.Helper()
	var got []sseEvent
	deadline := time.Now().Add(limit)
	for {
		ev := c.next(t, time.Until(deadline))
		got = append(got, ev)
		pos, err := changefeed.ParsePosition(ev.id)
		require.NoError(t, err)
		if ev.name != "ready" && hasAll(pos, cursors) {
			return got
		}
	}
}

func names(events []sseEvent) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.name
	}
	return out
}

func subjectsN(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}
