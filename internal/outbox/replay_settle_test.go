package outbox

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/testwait"
)

// Issue 14, item 1: when a replay settles, the finalize puts a
// message_changed change for the replay and for its original on the feed
// (so every open page of the original follows it) and a replay_job change
// for its bulk job, and the dispatcher wakes the feed after commit. An
// ordinary message's finalize writes no feed row (invariant 9's budget).
func TestASettledReplayReachesItsOriginalsPagesAndItsJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "d")
	dest := deadMessages(t, pool, 1, Message{Topic: "t", Destination: "d", Payload: []byte(`{"n": 0}`)})
	orig := idOf(t, pool, "state = 'dead'")
	job := uuid.New()
	var outcomes []Outcome
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		outcomes, err = ReplayBatch(ctx, tx, BatchRequest{Mode: Redeliver, Actor: "ann", Job: job,
			Messages: []MessageRequest{{MessageID: orig, RequestID: uuid.New()}}})
		return err
	}))
	require.Len(t, outcomes, 1)
	require.NoError(t, outcomes[0].Err)
	replayID := outcomes[0].Replayed.ID
	require.Equal(t, 1, countWhere(t, pool, "id = $1 AND replay_job = $2", replayID, job))
	enqueue(t, pool, Message{Topic: "t", Destination: "d", Payload: []byte(`{"n": 1}`)})
	ordinary := idOf(t, pool, "replay_of IS NULL AND state = 'pending'")

	var woken atomic.Int64
	d := startDispatcher(t, pool, Config{Workers: 1, Routes: map[string]Route{"d": {Destination: dest}}, Changed: func() { woken.Add(1) }})
	testwait.Until(t, time.Minute, "both delivered", func() bool { return countWhere(t, pool, "state = 'delivered'") == 2 })
	d.Stop()

	changes := func(kind, subject string) (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.changes WHERE kind = $1 AND subject = $2`, kind, subject).Scan(&n))
		return n
	}
	for _, id := range []int64{orig, replayID} {
		require.Equal(t, 1, changes("message_changed", itoa64(id)), "message %d", id)
	}
	require.Zero(t, changes("message_changed", itoa64(ordinary)), "an ordinary message's finalize writes no feed row")
	require.Equal(t, 1, changes("replay_job", job.String()))
	var action string
	require.NoError(t, pool.QueryRow(ctx, `SELECT payload->>'action' FROM switchyard.changes WHERE kind = 'message_changed' AND subject = $1`,
		itoa64(orig)).Scan(&action))
	require.Equal(t, "message.delivered", action)
	require.GreaterOrEqual(t, woken.Load(), int64(1), "the feed is woken after the commit")
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
