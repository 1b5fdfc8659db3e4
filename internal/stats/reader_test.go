package stats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/testwait"
)

// lockSnapshot holds an ACCESS EXCLUSIVE lock on the snapshot table in a
// transaction of its own, so that every read of the row blocks until the
// returned function releases it.
func lockSnapshot(t *testing.T, pool *pgxpool.Pool) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `LOCK TABLE switchyard.stats_snapshot IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	var once sync.Once
	release = func() { once.Do(func() { require.NoError(t, tx.Rollback(ctx)) }) }
	t.Cleanup(release)
	return release
}

// waitBlocked waits until a backend waits for a lock on the snapshot table:
// the Reader's read has reached the database and is stuck there.
func waitBlocked(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	testwait.Until(t, 10*time.Second, "the read to block on the lock", func() bool {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT count(*) FROM pg_locks
			WHERE NOT granted AND relation = 'switchyard.stats_snapshot'::regclass`).Scan(&n))
		return n > 0
	})
}

// waitWaiters waits until n callers wait for the Reader's read.
func waitWaiters(t *testing.T, r *Reader, n int) {
	t.Helper()
	testwait.Until(t, 10*time.Second, fmt.Sprintf("%d callers to wait", n), func() bool { return r.waiters() == n })
}

// TestReaderCallerGivesUpWhileTheReadIsBlocked: while one caller's read is
// stuck behind a lock, another caller whose context ends returns at once
// (it does not queue behind the read), and the first caller's read is not
// cancelled by it.
func TestReaderCallerGivesUpWhileTheReadIsBlocked(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	db := &countingDB{Pool: pool}
	r := NewReader(db, time.Hour)
	release := lockSnapshot(t, pool)

	patient := make(chan error, 1)
	go func() {
		_, err := r.Get(context.Background())
		patient <- err
	}()
	waitBlocked(t, pool)
	waitWaiters(t, r, 1)

	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() {
		_, err := r.Get(ctx)
		returned <- err
	}()
	waitWaiters(t, r, 2)
	cancel()
	select {
	case err := <-returned:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(2 * time.Second):
		t.Fatal("the cancelled caller did not return while the read was blocked")
	}

	// A caller with a deadline gives up at its deadline, too.
	short, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	began := time.Now()
	_, err := r.Get(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(began), 2*time.Second)

	release()
	require.NoError(t, <-patient, "the read went on for the caller that waited")
	_, err = r.Get(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 1, db.rows.Load(), "one read served them all")
}

// TestReaderConcurrentCallersShareOneRead: callers that all arrive while a
// read is in flight wait for it and get its result; none starts another,
// even with a cache that expires at once.
func TestReaderConcurrentCallersShareOneRead(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	db := &countingDB{Pool: pool}
	r := NewReader(db, time.Nanosecond)
	release := lockSnapshot(t, pool)

	const callers = 20
	results := make(chan error, callers)
	for range callers {
		go func() {
			_, err := r.Get(context.Background())
			results <- err
		}()
	}
	waitBlocked(t, pool)
	waitWaiters(t, r, callers)
	require.EqualValues(t, 1, db.rows.Load())
	release()
	for range callers {
		require.NoError(t, <-results)
	}
	require.EqualValues(t, 1, db.rows.Load(), "one read for every caller that waited")
}

// TestReaderReportsAFailedRead: a read that fails fails its callers, and
// the next caller reads again.
func TestReaderReportsAFailedRead(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	db := &countingDB{Pool: pool}
	r := NewReader(db, time.Hour)
	_, err := pool.Exec(context.Background(), `DELETE FROM switchyard.stats_snapshot`)
	require.NoError(t, err)
	_, err = r.Get(context.Background())
	require.Error(t, err)
	require.False(t, errors.Is(err, pgx.ErrNoRows), "ErrNoRows is mapped once")
	_, err = pool.Exec(context.Background(), `INSERT INTO switchyard.stats_snapshot DEFAULT VALUES`)
	require.NoError(t, err)
	_, err = r.Get(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 2, db.rows.Load())
}
