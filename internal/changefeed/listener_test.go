package changefeed

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestCursorRoundTripsAndOrders(t *testing.T) {
	t.Parallel()
	for _, c := range []Cursor{{}, {XID: 1, ID: 2}, {XID: 1<<63 + 5, ID: 1<<62 + 1}} {
		got, err := ParseCursor(c.String())
		require.NoError(t, err)
		require.Equal(t, c, got)
	}
	for _, bad := range []string{"", "1", "1-", "-1", "x-1", "1-x", "1--1", "1-2-3"} {
		_, err := ParseCursor(bad)
		require.Error(t, err, bad)
	}
	require.Equal(t, -1, Cursor{XID: 1, ID: 9}.Compare(Cursor{XID: 2, ID: 1}), "xid first")
	require.Equal(t, 1, Cursor{XID: 2, ID: 2}.Compare(Cursor{XID: 2, ID: 1}))
	require.Equal(t, 0, Cursor{XID: 2, ID: 2}.Compare(Cursor{XID: 2, ID: 2}))
}

func TestAppendRejectsInvalidChangesAndLeavesTheTransactionUsable(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	for name, c := range map[string]Change{
		"no kind":       {},
		"long kind":     {Kind: "k" + strings.Repeat("x", 64)},
		"newline kind":  {Kind: "k\nevent: x"},
		"long subject":  {Kind: "k", Subject: string(make([]byte, 513))},
		"large payload": {Kind: "k", Payload: json.RawMessage(`"` + string(make([]byte, MaxPayloadBytes)) + `"`)},
		"invalid json":  {Kind: "k", Payload: json.RawMessage(`{`)},
	} {
		err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
			err := Append(context.Background(), tx, c)
			require.ErrorIs(t, err, ErrInvalid, name)
			return Append(context.Background(), tx, Change{Kind: "k"})
		})
		require.NoError(t, err, name)
	}
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM switchyard.changes WHERE payload = '{}'").Scan(&n))
	require.Equal(t, 6, n, "the valid appends committed, with an empty object for no payload")
}

func TestStartTwiceFailsAndStopIsIdempotent(t *testing.T) {
	t.Parallel()
	l := NewListener(dbtest.New(t), Config{})
	require.Panics(t, func() { l.Subscribe(func([]Change) {}) }, "no position before Start")
	l.Stop() // before Start: nothing to stop
	require.NoError(t, l.Start(context.Background()))
	require.ErrorIs(t, l.Start(context.Background()), ErrStarted)
	l.Stop()
	l.Stop()
}

// A listener without From starts after the newest change: history is not
// replayed, what comes next is.
func TestListenerStartsAtTheHead(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	appendCommitted(t, pool, "k", "old-1", "old-2")
	l := NewListener(pool, Config{})
	start(t, l)
	c := newCollector()
	from, cancel := l.Subscribe(c.receive)
	defer cancel()
	require.NotZero(t, from.After, "the start is after the existing changes")
	appendCommitted(t, pool, "k", "new")
	require.NoError(t, Notify(context.Background(), pool))
	require.Equal(t, []string{"new"}, subjects(c.waitFor(t, 1, 10*time.Second)))
	require.False(t, from.Has(c.snapshot()[0].Cursor))
}

// Two transactions whose ids commit out of order: whichever order, the
// one that commits first is delivered at once (the other one, still in
// progress, holds nothing back), the other when it commits, and none is
// skipped or delivered twice. In "lower id, higher xid" a reader that
// tracked ids alone would have moved past id 1 when it saw id 2 commit
// first; in "lower xid commits last" one that tracked (xid, id) alone would
// have moved past A's xid.
func TestOutOfOrderCommitsAreNeverSkipped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// bFirstXID makes B take its xid before A, so A gets the lower
		// id and the higher xid.
		bFirstXID bool
	}{{"lower id and lower xid commits last", false}, {"lower id but higher xid commits last", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.New(t)
			ctx := context.Background()
			l := NewListener(pool, Config{From: &Cursor{}, PollInterval: time.Hour})
			c := newCollector()
			start(t, l)
			_, cancel := l.Subscribe(c.receive)
			defer cancel()

			txA, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer txA.Rollback(ctx)
			txB, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer txB.Rollback(ctx)
			if tc.bFirstXID {
				_, err = txB.Exec(ctx, "SELECT pg_current_xact_id()")
				require.NoError(t, err)
			}
			require.NoError(t, Append(ctx, txA, Change{Kind: "k", Subject: "A"}))
			require.NoError(t, Append(ctx, txB, Change{Kind: "k", Subject: "B"}))
			require.NoError(t, txB.Commit(ctx))
			require.NoError(t, Notify(ctx, pool))

			got := c.waitFor(t, 1, 10*time.Second)
			require.Equal(t, []string{"B"}, subjects(got), "B is delivered while A is still open")
			var xidA uint64
			require.NoError(t, txA.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&xidA))
			if !tc.bFirstXID {
				require.Equal(t, []Open{{XID: xidA}}, openOf(got[0].Position, xidA), "B's position remembers A as open")
			}
			require.NoError(t, txA.Commit(ctx))
			require.NoError(t, Notify(ctx, pool))
			got = c.waitFor(t, 2, 10*time.Second)
			require.Equal(t, []string{"B", "A"}, subjects(got))
			requireResumable(t, got)
			require.True(t, l.Position().Has(got[1].Cursor))
			require.Empty(t, openOf(l.Position(), xidA), "A is forgotten once delivered")
		})
	}
}

// openOf returns the entry of xid in p.Open, if any.
func openOf(p Position, xid uint64) []Open {
	for _, o := range p.Open {
		if o.XID == xid {
			return []Open{o}
		}
	}
	return nil
}

// The LISTEN connection is killed; changes are committed and notified while
// it is down (those notifications reach nobody). The reconnect alone (the
// poll is an hour) must catch up, and exactly one LISTEN connection remains.
func TestListenerReconnectsAndCatchesUpAfterTerminate(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	var connects atomic.Int32
	reconnecting := make(chan struct{})
	release := make(chan struct{})
	cfg := Config{From: &Cursor{}, PollInterval: time.Hour, ReconnectMin: 10 * time.Millisecond}
	cfg.Connect = func(ctx context.Context) (*pgx.Conn, error) {
		if connects.Add(1) == 2 {
			close(reconnecting)
			select { // the test holds the reconnect until it has written
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	}
	l := NewListener(pool, cfg)
	start(t, l)
	c := newCollector()
	_, cancel := l.Subscribe(c.receive)
	defer cancel()

	appendCommitted(t, pool, "k", "before")
	require.NoError(t, Notify(ctx, pool))
	c.waitFor(t, 1, 10*time.Second)
	pids := listenerPIDs(t, pool)
	require.Len(t, pids, 1)

	var ok bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pids[0]).Scan(&ok))
	require.True(t, ok)
	select { // the listener noticed and is reconnecting
	case <-reconnecting:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not notice its connection was killed")
	}
	appendCommitted(t, pool, "k", "during-1", "during-2")
	require.NoError(t, Notify(ctx, pool))
	close(release)

	got := c.waitFor(t, 3, 30*time.Second) // the poll is an hour: the reconnect delivers
	require.Equal(t, []string{"before", "during-1", "during-2"}, subjects(got))
	requireResumable(t, got)
	testwait.Until(t, 10*time.Second, "one new LISTEN connection", func() bool {
		now := listenerPIDs(t, pool)
		return len(now) == 1 && now[0] != pids[0]
	})
}

// With no NOTIFY at all, the poll still delivers.
func TestPollDeliversWithoutAnyNotification(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	firstRead := make(chan struct{})
	l := NewListener(pool, Config{From: &Cursor{}, PollInterval: 100 * time.Millisecond})
	var once sync.Once
	l.onRead = func(bool, error) { once.Do(func() { close(firstRead) }) }
	start(t, l)
	c := newCollector()
	_, cancel := l.Subscribe(c.receive)
	defer cancel()
	<-firstRead // the connect's catch-up is done: only a poll can deliver now
	appendCommitted(t, pool, "k", "quiet")
	require.Equal(t, []string{"quiet"}, subjects(c.waitFor(t, 1, 10*time.Second)))
}

// Many writers commit concurrently with random delays inside their
// transactions: every change is delivered exactly once, and every
// change's position is a resumable cursor.
func TestConcurrentWritersAreDeliveredOnceAndResumable(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	l := NewListener(pool, Config{From: &Cursor{}, BatchSize: 37})
	start(t, l)
	c := newCollector()
	_, cancel := l.Subscribe(c.receive)
	defer cancel()

	const writers, each = 12, 25
	errs := make(chan error, writers)
	testwait.Together(writers, func(w int) {
		errs <- write(ctx, pool, w, each)
	})
	for range writers {
		require.NoError(t, <-errs)
	}
	appendCommitted(t, pool, "k", "last")
	require.NoError(t, Notify(ctx, pool))
	got := c.waitFor(t, writers*each+1, 20*time.Second)
	require.Len(t, got, writers*each+1, "nothing twice")
	requireResumable(t, got)
	want := map[string]bool{"last": true}
	for w := range writers {
		for i := range each {
			want[fmt.Sprintf("w%d-%d", w, i)] = true
		}
	}
	seen := map[string]bool{}
	for _, ch := range got {
		require.True(t, want[ch.Subject], ch.Subject)
		require.False(t, seen[ch.Subject], "delivered twice: %s", ch.Subject)
		seen[ch.Subject] = true
	}
	require.Equal(t, "last", got[len(got)-1].Subject)
}

// write commits n changes, one transaction each, holding each transaction
// open a random while so that ids commit out of order.
func write(ctx context.Context, pool *pgxpool.Pool, w, n int) error {
	for i := range n {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := Append(ctx, tx, Change{Kind: "k", Subject: fmt.Sprintf("w%d-%d", w, i)}); err != nil {
				return err
			}
			time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond) // a random commit delay, not a wait
			return nil
		})
		if err != nil {
			return err
		}
		if i%5 == 0 { // most commits send no NOTIFY: the poll must cover
			if err := Notify(ctx, pool); err != nil {
				return err
			}
		}
	}
	return nil
}
