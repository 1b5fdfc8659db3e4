package bulkreplay

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/outbox"
)

// Issue 14, items 3 and 5: a job of blocked heads (Filter.BlockedHeads)
// replays the dead heads their aggregates wait behind and no other dead
// message, and each of its replays carries the job (replay_job), so the
// job's page counts their outcomes.
func TestBlockedHeadsJobReplaysOnlyTheHeads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, 6)
	// Two of the six dead messages block an aggregate each.
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.outbox_blocked_aggregates (destination, aggregate_type, aggregate_id, dead_message_id)
		SELECT 'd', 'order', id::text, id FROM switchyard.outbox WHERE (payload->>'n')::int IN (1, 4)`)
	require.NoError(t, err)
	f := Filter{BlockedHeads: true}
	estimate, err := Estimate(ctx, pool, f)
	require.NoError(t, err)
	require.Equal(t, Matches{N: 2}, estimate)
	job, err := start(t, pool, Spec{Filter: f, Mode: outbox.Redeliver, Actor: "ann", RatePerSecond: 1000, Estimate: estimate.N})
	require.NoError(t, err)
	runner(t, pool, Config{Poll: 10 * time.Millisecond})

	job = waitJob(t, pool, job, "the job done", func(j Job) bool { return j.State == "done" })
	require.Equal(t, int64(2), job.Replayed)
	require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM switchyard.outbox r JOIN switchyard.outbox o ON o.id = r.replay_of
		WHERE r.replay_job = $1 AND (o.payload->>'n')::int IN (1, 4)`, job.ID))
	require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of IS NOT NULL`), "no other dead message")
}
