package registry

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
)

// A Share whose statement's answer is lost (here: it waits on a lock past
// its deadline) drops the outcomes it carried, since they may have been
// written. The recovery those outcomes showed still brings the waiting
// heads forward at the next Share: probeSooner decides on what this
// process saw since its last decision, not since the last Share (CI met a
// head left to its hour-long backoff after one share timed out).
func TestRecoverySeenByAFailedShareStillBringsHeadsForward(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address, secret_ref)
		VALUES ('recovering', 'webhook', 'http://127.0.0.1:9/', 'TEST_SECRET')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload)
		SELECT 'order.changed', 'recovering', 'order', 'o-1', '{}' FROM generate_series(1, 3)`)
	require.NoError(t, err)
	waiting := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox_aggregates
			WHERE aggregate_id = 'o-1' AND due_at > now() + interval '10 minutes'`).Scan(&n))
		return n
	}
	_, err = pool.Exec(ctx, `UPDATE switchyard.outbox_aggregates SET due_at = now() + interval '1 hour' WHERE aggregate_id = 'o-1'`)
	require.NoError(t, err)
	require.Equal(t, 1, waiting())

	reg := New(pool, Config{Owner: "probe", HeadWait: time.Second, Getenv: func(string) string { return testSecret }})
	t.Cleanup(reg.Close)
	_, _, err = reg.Sync(ctx)
	require.NoError(t, err)
	reg.built["recovering"].route.Guard.ReturnOutcomes(20, 0) // twenty deliveries succeeded

	lock, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = lock.Exec(ctx, `LOCK TABLE switchyard.breaker_outcomes IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	lost, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	require.Error(t, reg.Share(lost), "the share waits on the lock past its deadline")
	cancel()
	require.NoError(t, lock.Rollback(ctx))
	require.Equal(t, 1, waiting(), "nothing brought forward by the failed share")

	require.NoError(t, reg.Share(ctx))
	require.Zero(t, waiting(), "the next share brings the head forward")
}

// A head's failure is counted when its answer arrives, but its backoff is
// written by the finalize that follows. When the destination delivers again
// in between, the probe finds the head still leased; the head, finalized
// later with a long backoff, is still brought forward by the next Share,
// although no delivery ended since (CI met a head left to its ~59 s
// backoff on a destination that had fallen idle).
func TestHeadFinalizedAfterTheProbeIsStillBroughtForward(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address, secret_ref)
		VALUES ('recovering', 'webhook', 'http://127.0.0.1:9/', 'TEST_SECRET')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload)
		SELECT 'order.changed', 'recovering', 'order', 'o-1', '{}' FROM generate_series(1, 3)`)
	require.NoError(t, err)
	waiting := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox_aggregates
			WHERE aggregate_id = 'o-1' AND due_at > now() + interval '10 minutes'`).Scan(&n))
		return n
	}
	// The head is in flight: its aggregate is leased.
	_, err = pool.Exec(ctx, `UPDATE switchyard.outbox_aggregates
		SET lease_owner = 'dispatcher', due_at = now() + interval '30 seconds' WHERE aggregate_id = 'o-1'`)
	require.NoError(t, err)

	reg := New(pool, Config{Owner: "probe", HeadWait: time.Second, Getenv: func(string) string { return testSecret }})
	t.Cleanup(reg.Close)
	_, _, err = reg.Sync(ctx)
	require.NoError(t, err)
	reg.built["recovering"].route.Guard.ReturnOutcomes(20, 1) // the head failed, then twenty deliveries succeeded
	require.NoError(t, reg.Share(ctx))

	// The head's finalize: the lease ends with a long backoff.
	_, err = pool.Exec(ctx, `UPDATE switchyard.outbox_aggregates
		SET lease_owner = NULL, due_at = now() + interval '1 hour' WHERE aggregate_id = 'o-1'`)
	require.NoError(t, err)
	require.Equal(t, 1, waiting())

	require.NoError(t, reg.Share(ctx))
	require.Zero(t, waiting(), "the next share brings the head forward, with no delivery ended since")
}
