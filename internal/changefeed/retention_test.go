package changefeed

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testwait"
)

// Since returns exactly the range asked for while nothing is pruned; after
// a prune, a cursor below the pruned one is expired and one at or above it
// still resumes.
func TestSinceResumesWithinRetentionAndExpiresBelowIt(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	appendCommitted(t, pool, "k", "a", "b", "c", "d")
	l := NewListener(pool, Config{From: &Cursor{}, PruneInterval: -1})
	start(t, l)
	c := newCollector()
	_, cancel := l.Subscribe(c.receive)
	defer cancel()
	l.Wake()
	all := c.waitFor(t, 4, 10*time.Second)

	// Positions without open transactions: those of the listener list
	// what other tests had in progress on the server, and the pruned
	// cursor below is far younger than a real one.
	at := func(i int) Position { return At(all[i].Cursor) }
	got, err := Since(ctx, pool, At(Cursor{}), at(3), Filter{}, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c", "d"}, subjects(got), "zero cursor resumes while nothing was pruned")
	got, err = l.Since(ctx, at(0), at(2), Filter{}, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "c"}, subjects(got), "after is excluded, upTo included")
	got, err = l.Since(ctx, all[0].Position, all[2].Position, Filter{}, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "c"}, subjects(got), "the listener's own positions")
	got, err = Since(ctx, pool, at(0), at(3), Filter{}, 2)
	require.NoError(t, err)
	require.Len(t, got, 2, "limit")

	// Prune the first two: make them old by moving their creation time.
	_, err = pool.Exec(ctx, "UPDATE switchyard.changes SET created_at = now() - interval '2 days' WHERE subject IN ('a', 'b')")
	require.NoError(t, err)
	pruneSettled(t, pool, 2)

	_, err = Since(ctx, pool, At(Cursor{}), at(3), Filter{}, 10)
	require.ErrorIs(t, err, ErrCursorExpired)
	_, err = Since(ctx, pool, at(0), at(3), Filter{}, 10)
	require.ErrorIs(t, err, ErrCursorExpired, "b is gone")
	_, err = Since(ctx, pool, Position{After: all[2].Cursor, Open: []Open{{XID: all[0].Cursor.XID}}}, at(3), Filter{}, 10)
	require.ErrorIs(t, err, ErrCursorExpired, "a transaction open at or before the pruned cursor may have lost rows")
	got, err = Since(ctx, pool, at(1), at(3), Filter{}, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"c", "d"}, subjects(got), "the pruned cursor itself still resumes")

	n, err := Prune(ctx, pool, time.Now().Add(-24*time.Hour))
	require.NoError(t, err)
	require.Zero(t, n, "idempotent")
}

// The listener's own retention job prunes on its interval.
func TestListenerPrunesOnItsInterval(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	appendCommitted(t, pool, "k", "old")
	_, err := pool.Exec(context.Background(), "UPDATE switchyard.changes SET created_at = now() - interval '2 hours'")
	require.NoError(t, err)
	start(t, NewListener(pool, Config{Retention: time.Hour, PruneInterval: 50 * time.Millisecond}))
	testwait.Until(t, 10*time.Second, "the old change to be pruned", func() bool {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM switchyard.changes").Scan(&n))
		return n == 0
	})
}

// pruneSettled prunes changes older than a day until want of them are
// gone: Prune deletes settled changes only, and other tests' transactions
// on the server may hold the watermark back for a moment.
func pruneSettled(t *testing.T, pool *pgxpool.Pool, want int64) {
	t.Helper()
	var pruned int64
	testwait.Until(t, 10*time.Second, fmt.Sprintf("%d changes pruned", want), func() bool {
		n, err := Prune(context.Background(), pool, time.Now().Add(-24*time.Hour))
		require.NoError(t, err)
		pruned += n
		return pruned == want
	})
}
