package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/testwait"
)

// batchScenario fills a fresh database with the cases a bulk replay meets,
// with fixed message ids, so that two databases built by it are alike, and
// returns the pool and the ids to replay (in a shuffled order, with one
// that does not exist):
//
//   - unordered dead messages of two fingerprints;
//   - aggregate "blocked": its dead head blocks two pending messages (one
//     of them is in the batch: not dead);
//   - aggregate "restored": its head went dead, was discarded (unblocking
//     it), a later message was delivered, then the head was restored: dead
//     but blocking nothing, so its replay is numbered after the others;
//   - a message replayed meanwhile by a single replay (in flight);
//   - a message whose replay by the batch's own request id exists already.
func batchScenario(t *testing.T) (*pgxpool.Pool, []int64) {
	t.Helper()
	ctx := context.Background()
	pool := setup(t, "d")
	n := 0
	msg := func(aggregate string) Message {
		n++
		m := Message{ID: uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%d", n)), Topic: "t", Destination: "d",
			AggregateID: aggregate, Payload: fmt.Appendf(nil, `{"n": %d}`, n)}
		if aggregate != "" {
			m.AggregateType = "order"
		}
		return m
	}
	var msgs []Message
	for range 12 {
		msgs = append(msgs, msg(""))
	}
	msgs = append(msgs, msg("blocked"), msg("blocked"), msg("blocked"), msg("restored"))
	dest := deadMessages(t, pool, 14, msgs...)
	_, err := pool.Exec(ctx, `UPDATE switchyard.outbox SET error_fingerprint = 'odd' WHERE id % 2 = 1 AND state = 'dead'`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `DELETE FROM switchyard.dead_letter_groups; DELETE FROM switchyard.dead_letter_hours;
		INSERT INTO switchyard.dead_letter_groups (fingerprint, dead, first_dead_at, last_dead_at, sample_id, destinations)
		SELECT error_fingerprint, count(*), now(), now(), max(id), '{d}' FROM switchyard.outbox WHERE state = 'dead' GROUP BY 1;
		INSERT INTO switchyard.dead_letter_hours (fingerprint, hour, dead)
		SELECT error_fingerprint, date_trunc('hour', now()), count(*) FROM switchyard.outbox WHERE state = 'dead' GROUP BY 1`)
	require.NoError(t, err)
	restored := idOf(t, pool, "aggregate_id = 'restored'")
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return Discard(ctx, tx, restored) }))
	enqueue(t, pool, msg("restored"))
	d := startDispatcher(t, pool, Config{Workers: 1, Routes: map[string]Route{"d": {Destination: dest}}})
	testwait.Until(t, 60e9, "the restored aggregate's next message delivered", func() bool { return countWhere(t, pool, "state = 'delivered'") == 1 })
	d.Stop()
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return Restore(ctx, tx, restored) }))

	meanwhile, existing := int64(2), int64(3)
	_, err = replay(t, pool, ReplayRequest{MessageID: meanwhile, RequestID: uuid.NewSHA1(uuid.NameSpaceURL, []byte("single")), Mode: Redeliver, Actor: "single"})
	require.NoError(t, err)
	_, err = replay(t, pool, ReplayRequest{MessageID: existing, RequestID: batchRequestID(existing), Mode: Redeliver, Actor: "bulk"})
	require.NoError(t, err)

	pending := idOf(t, pool, "aggregate_id = 'blocked' AND state = 'pending' ORDER BY id LIMIT 1")
	ids := []int64{restored, 7, 1 << 40, pending}
	for id := int64(1); id <= 16; id++ {
		if id != 7 && id != restored && id != pending {
			ids = append(ids, id)
		}
	}
	return pool, ids
}

func batchRequestID(id int64) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceURL, fmt.Appendf(nil, "batch/%d", id))
}

// endState is what a replay may change, identified so that it compares
// across databases: replays by what they replay, not by their own ids.
func endState(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT 'message ' || coalesce('replay of ' || o.replay_of, o.id::text) || ': ' || concat_ws(' ', o.state,
			o.aggregate_id, o.aggregate_seq, 'replays=' || o.replays, 'generation=' || o.generation, o.payload::text,
			'key=' || coalesce(o.delivery_key, o.message_id), o.replay_request, o.replay_mode, o.replay_actor)
		FROM switchyard.outbox o
		UNION ALL
		SELECT concat_ws(' ', 'aggregate', aggregate_id, last_seq, done_seq, due_at = 'infinity') FROM switchyard.outbox_aggregates
		UNION ALL
		SELECT concat_ws(' ', 'blocked', aggregate_id, dead_message_id) FROM switchyard.outbox_blocked_aggregates
		UNION ALL
		SELECT concat_ws(' ', 'group', fingerprint, dead) FROM switchyard.dead_letter_groups
		ORDER BY 1`)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// A batch leaves the database exactly as replaying its messages one by one
// (in id order) does, and answers each message as Replay would.
func TestReplayBatchMatchesOneByOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	batched, ids := batchScenario(t)
	single, _ := batchScenario(t)
	require.Equal(t, endState(t, batched), endState(t, single), "two scenarios alike before replaying")

	req := BatchRequest{Mode: Redeliver, Actor: "bulk", Reason: "receiver fixed"}
	for _, id := range ids {
		req.Messages = append(req.Messages, MessageRequest{MessageID: id, RequestID: batchRequestID(id)})
	}
	var outcomes []Outcome
	require.NoError(t, pgx.BeginFunc(ctx, batched, func(tx pgx.Tx) error {
		var err error
		outcomes, err = ReplayBatch(ctx, tx, req)
		return err
	}))
	require.Len(t, outcomes, len(ids))
	for i, o := range outcomes {
		if i > 0 {
			require.Less(t, outcomes[i-1].MessageID, o.MessageID, "outcomes in id order")
		}
		one, err := replay(t, single, ReplayRequest{MessageID: o.MessageID, RequestID: batchRequestID(o.MessageID),
			Mode: Redeliver, Actor: "bulk", Reason: "receiver fixed"})
		if err != nil {
			require.EqualError(t, o.Err, err.Error(), "message %d", o.MessageID)
			continue
		}
		require.NoError(t, o.Err, "message %d", o.MessageID)
		require.Equal(t, one.Existing, o.Replayed.Existing, "message %d", o.MessageID)
		require.Equal(t, one.Key, o.Replayed.Key, "message %d", o.MessageID)
	}
	require.Equal(t, endState(t, single), endState(t, batched))
	requireDeadLetterGroupsMatch(t, batched)

	kinds := map[string]int{}
	for _, o := range outcomes {
		switch {
		case o.Err == nil && o.Replayed.Existing:
			kinds["existing"]++
		case o.Err == nil:
			kinds["replayed"]++
		case errors.Is(o.Err, ErrNotDead):
			kinds["not dead"]++
		case errors.Is(o.Err, ErrReplayInFlight):
			kinds["in flight"]++
		case errors.Is(o.Err, ErrNotFound):
			kinds["not found"]++
		}
	}
	require.Equal(t, map[string]int{"existing": 1, "replayed": 12, "not dead": 2, "in flight": 1, "not found": 1}, kinds,
		"every case of the scenario met")
	blocked, err := BlockedAggregates(ctx, batched, 10)
	require.NoError(t, err)
	require.Empty(t, blocked, "the replayed head unblocked its aggregate")
}

// Batches over overlapping messages, concurrent with single replays of
// them (other operators), never deadlock and never replay a message twice:
// each message ends with exactly one replay in flight, and every request is
// answered with a replay or a refusal that says why.
func TestReplayBatchConcurrentWithSingleReplays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "d")
	var msgs []Message
	for n := range 60 {
		m := Message{Topic: "t", Destination: "d", Payload: fmt.Appendf(nil, `{"n": %d}`, n)}
		if n%3 == 0 {
			m.AggregateType, m.AggregateID = "order", fmt.Sprintf("a%d", n%4)
		}
		msgs = append(msgs, m)
	}
	deadMessages(t, pool, 44, msgs...)
	rows, err := pool.Query(ctx, `SELECT id FROM switchyard.outbox WHERE state = 'dead' ORDER BY id`)
	require.NoError(t, err)
	dead, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)

	start := make(chan struct{})
	var wg sync.WaitGroup
	var created atomic.Int64
	for b := range 4 {
		wg.Go(func() {
			<-start
			req := BatchRequest{Mode: Redeliver, Actor: fmt.Sprintf("job%d", b)}
			for i := len(dead) - 1 - b; i >= 0; i-- { // reversed: the batch orders its locks itself
				req.Messages = append(req.Messages, MessageRequest{MessageID: dead[i], RequestID: uuid.New()})
			}
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				outcomes, err := ReplayBatch(ctx, tx, req)
				for _, o := range outcomes {
					switch {
					case o.Err == nil:
						created.Add(1)
					case !errors.Is(o.Err, ErrReplayInFlight):
						t.Errorf("batch %d, message %d: %v", b, o.MessageID, o.Err)
					}
				}
				return err
			})
			if err != nil {
				t.Errorf("batch %d: %v", b, err)
			}
		})
	}
	for _, id := range dead {
		wg.Go(func() {
			<-start
			_, err := replay(t, pool, ReplayRequest{MessageID: id, RequestID: uuid.New(), Mode: Redeliver, Actor: "single"})
			switch {
			case err == nil:
				created.Add(1)
			case !errors.Is(err, ErrReplayInFlight):
				t.Errorf("single replay of %d: %v", id, err)
			}
		})
	}
	close(start)
	wg.Wait()
	require.Equal(t, int64(len(dead)), created.Load(), "one replay created per message")
	require.Equal(t, len(dead), countWhere(t, pool, "replay_of IS NOT NULL AND state = 'pending'"))
	require.Equal(t, len(dead), countWhere(t, pool, "state = 'dead' AND replays = 1"))
	requireDeadLetterGroupsMatch(t, pool)
}
