package changefeed

import (
	"context"
	"testing"
	"time"

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

	got, err := Since(ctx, pool, Cursor{}, all[3].Cursor, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c", "d"}, subjects(got), "zero cursor resumes while nothing was pruned")
	got, err = l.Since(ctx, all[0].Cursor, all[2].Cursor, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "c"}, subjects(got), "after is excluded, upTo included")
	got, err = Since(ctx, pool, all[0].Cursor, all[3].Cursor, 2)
	require.NoError(t, err)
	require.Len(t, got, 2, "limit")

	// Prune the first two: make them old by moving their creation time.
	_, err = pool.Exec(ctx, "UPDATE switchyard.changes SET created_at = now() - interval '2 days' WHERE subject IN ('a', 'b')")
	require.NoError(t, err)
	n, err := Prune(ctx, pool, time.Now().Add(-24*time.Hour))
	require.NoError(t, err)
	require.EqualValues(t, 2, n)

	_, err = Since(ctx, pool, Cursor{}, all[3].Cursor, 10)
	require.ErrorIs(t, err, ErrCursorExpired)
	_, err = Since(ctx, pool, all[0].Cursor, all[3].Cursor, 10)
	require.ErrorIs(t, err, ErrCursorExpired, "b is gone")
	got, err = Since(ctx, pool, all[1].Cursor, all[3].Cursor, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"c", "d"}, subjects(got), "the pruned cursor itself still resumes")

	n, err = Prune(ctx, pool, time.Now().Add(-24*time.Hour))
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
