package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/testwait"
)

// switchable is a destination that refuses every delivery (permanently)
// until it is healed, and records what it accepted, in order.
type switchable struct {
	healed   atomic.Bool
	mu       sync.Mutex
	accepted []destination.Delivery // guarded by mu
}

func (s *switchable) Deliver(_ context.Context, d destination.Delivery) (destination.Outcome, error) {
	if !s.healed.Load() {
		return destination.Outcome{StatusCode: 422}, destination.Permanent(errors.New("HTTP 422: rejected"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accepted = append(s.accepted, d)
	return destination.Outcome{StatusCode: 200}, nil
}

func (s *switchable) deliveries() []destination.Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]destination.Delivery(nil), s.accepted...)
}

// deadMessages enqueues msgs to destination "d", lets a dispatcher send
// every one that can go to dead, and returns the destination, healed.
func deadMessages(t *testing.T, pool *pgxpool.Pool, dead int, msgs ...Message) *switchable {
	t.Helper()
	dest := &switchable{}
	enqueue(t, pool, msgs...)
	d := startDispatcher(t, pool, Config{Workers: 1, Routes: map[string]Route{"d": {Destination: dest}}})
	testwait.Until(t, time.Minute, "the messages dead", func() bool { return countWhere(t, pool, "state = 'dead'") == dead })
	d.Stop()
	dest.healed.Store(true)
	return dest
}

func replay(t *testing.T, pool *pgxpool.Pool, r ReplayRequest) (Replayed, error) {
	t.Helper()
	var out Replayed
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		out, err = Replay(context.Background(), tx, r)
		return err
	})
	return out, err
}

func idOf(t *testing.T, pool *pgxpool.Pool, cond string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT id FROM switchyard.outbox WHERE "+cond).Scan(&id))
	return id
}

// Invariant 6: concurrent replays of one dead message by different
// requests (two operators) yield one replay; the others are refused and say
// why. Concurrent retries of one request (a double click) yield that same
// replay, created once.
func TestReplayCreatesOneRowWhateverTheRetriesAndOperators(t *testing.T) {
	t.Parallel()
	pool := setup(t, "d")
	deadMessages(t, pool, 2, Message{Topic: "t", Destination: "d", Payload: []byte(`{"n": 0}`)},
		Message{Topic: "t", Destination: "d", Payload: []byte(`{"n": 1}`)})
	raced := idOf(t, pool, "state = 'dead' AND payload->>'n' = '0'")
	clicked := idOf(t, pool, "state = 'dead' AND payload->>'n' = '1'")

	const operators = 20
	var created, refused atomic.Int64
	operator := func() {
		_, err := replay(t, pool, ReplayRequest{MessageID: raced, RequestID: uuid.New(), Mode: Redeliver, Actor: "op"})
		switch {
		case err == nil:
			created.Add(1)
		case errors.Is(err, ErrReplayInFlight):
			refused.Add(1)
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	request := uuid.New()
	var fresh atomic.Int64
	ids := make(chan int64, operators)
	retry := func() {
		r, err := replay(t, pool, ReplayRequest{MessageID: clicked, RequestID: request, Mode: Redeliver, Actor: "op"})
		if err != nil {
			t.Errorf("a retried request: %v", err)
			return
		}
		if !r.Existing {
			fresh.Add(1)
		}
		ids <- r.ID
	}
	testwait.Together(2*operators, func(i int) {
		if i < operators {
			operator()
		} else {
			retry()
		}
	})
	close(ids)
	require.Equal(t, int64(1), created.Load())
	require.Equal(t, int64(operators-1), refused.Load())
	require.Equal(t, int64(1), fresh.Load(), "one request, one replay")
	var first int64
	for id := range ids {
		if first == 0 {
			first = id
		}
		require.Equal(t, first, id, "every retry is answered with the same replay")
	}
	require.Equal(t, 4, countWhere(t, pool, "true"), "two originals and exactly one replay of each")
}

func TestReplayRefusalsSayWhy(t *testing.T) {
	t.Parallel()
	pool := setup(t, "d")
	deadMessages(t, pool, 1, Message{Topic: "t", Destination: "d", Payload: []byte(`{"n": 0}`)})
	orig := idOf(t, pool, "state = 'dead'")

	_, err := replay(t, pool, ReplayRequest{MessageID: orig, RequestID: uuid.New(), Mode: Reapply, Actor: "op"})
	require.ErrorIs(t, err, ErrReasonRequired)
	_, err = replay(t, pool, ReplayRequest{MessageID: 1 << 40, RequestID: uuid.New(), Mode: Redeliver})
	require.ErrorIs(t, err, ErrNotFound)
	_, err = replay(t, pool, ReplayRequest{MessageID: orig, RequestID: uuid.New(), Mode: Redeliver, Payload: []byte(`{nope`)})
	require.ErrorContains(t, err, "not valid JSON")

	request := uuid.New()
	first, err := replay(t, pool, ReplayRequest{MessageID: orig, RequestID: request, Mode: Redeliver, Actor: "op"})
	require.NoError(t, err)
	again, err := replay(t, pool, ReplayRequest{MessageID: orig, RequestID: request, Mode: Redeliver, Actor: "op"})
	require.NoError(t, err, "a retried request is answered, not refused")
	require.True(t, again.Existing)
	require.Equal(t, first.ID, again.ID)

	_, err = replay(t, pool, ReplayRequest{MessageID: first.ID, RequestID: request, Mode: Redeliver, Actor: "op"})
	require.ErrorIs(t, err, ErrRequestReused, "a request id answers for its own message only")
	_, err = replay(t, pool, ReplayRequest{MessageID: first.ID, RequestID: uuid.New(), Mode: Redeliver, Actor: "op"})
	require.ErrorIs(t, err, ErrNotDead, "a message still pending is not replayed")
	require.ErrorContains(t, err, "it is pending")
}

// Redeliver keeps the idempotency key, reapply gets a new one; the edited
// payload goes to the replay only; the original stays dead, marked, and
// leaves its dead-letter group; a replay that dies again is counted again.
func TestReplayModesKeysAndMarks(t *testing.T) {
	t.Parallel()
	pool := setup(t, "d")
	dest := deadMessages(t, pool, 1, Message{Topic: "t", Destination: "d", Payload: []byte(`{"n": 0}`)})
	orig := idOf(t, pool, "state = 'dead'")
	var key uuid.UUID
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT message_id FROM switchyard.outbox WHERE id = $1`, orig).Scan(&key))

	redelivered, err := replay(t, pool, ReplayRequest{MessageID: orig, RequestID: uuid.New(), Mode: Redeliver, Actor: "ann", Reason: "fixed the receiver"})
	require.NoError(t, err)
	require.Equal(t, key, redelivered.Key, "redeliver: the destination dedupes on the same key")
	var groupDead int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT dead FROM switchyard.dead_letter_groups`).Scan(&groupDead))
	require.Zero(t, groupDead, "the replayed original left its group")
	requireDeadLetterGroupsMatch(t, pool)

	d := startDispatcher(t, pool, Config{Workers: 1, Routes: map[string]Route{"d": {Destination: dest}}})
	testwait.Until(t, time.Minute, "the replay delivered", func() bool { return countWhere(t, pool, "state = 'delivered'") == 1 })
	d.Stop()
	require.Equal(t, key.String(), dest.deliveries()[0].MessageID)

	reapplied, err := replay(t, pool, ReplayRequest{MessageID: orig, RequestID: uuid.New(), Mode: Reapply, Actor: "bob",
		Reason: "the customer asked", Payload: []byte(`{"n": 1, "edited": true}`)})
	require.NoError(t, err)
	require.NotEqual(t, key, reapplied.Key, "reapply: a new key")
	var replays, generation int
	var payload string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT o.replays, r.generation, r.payload::text
		FROM switchyard.outbox o JOIN switchyard.outbox r ON r.replay_of = o.id AND r.id = $2 WHERE o.id = $1`,
		orig, reapplied.ID).Scan(&replays, &generation, &payload))
	require.Equal(t, 2, replays)
	require.Equal(t, 1, generation)
	require.JSONEq(t, `{"n": 1, "edited": true}`, payload)
	require.Equal(t, 1, countWhere(t, pool, `id = $1 AND state = 'dead' AND payload->>'n' = '0'`, orig), "the original is unchanged")

	dest.healed.Store(false)
	d = startDispatcher(t, pool, Config{Workers: 1, Routes: map[string]Route{"d": {Destination: dest}}})
	testwait.Until(t, time.Minute, "the reapplied replay dead again", func() bool {
		return countWhere(t, pool, "id = $1 AND state = 'dead'", reapplied.ID) == 1
	})
	d.Stop()
	requireDeadLetterGroupsMatch(t, pool)
}

// A replay of an aggregate's dead head takes the head's place: it is
// delivered before the messages that waited behind it, and unblocks the
// aggregate. Discarding a dead head unblocks it too; restoring brings the
// message back among the dead letters.
func TestReplayOrDiscardOfADeadHeadUnblocksItsAggregate(t *testing.T) {
	t.Parallel()
	pool := setup(t, "d")
	var msgs []Message
	for _, aggregate := range []string{"replayed", "discarded"} {
		for n := range 3 {
			msgs = append(msgs, Message{Topic: "t", Destination: "d", AggregateType: "order", AggregateID: aggregate,
				Payload: fmt.Appendf(nil, `{"n": %d}`, n)})
		}
	}
	dest := deadMessages(t, pool, 2, msgs...)
	blocked, err := BlockedAggregates(context.Background(), pool, 10)
	require.NoError(t, err)
	require.Len(t, blocked, 2)

	_, err = replay(t, pool, ReplayRequest{MessageID: idOf(t, pool, "state = 'dead' AND aggregate_id = 'replayed'"),
		RequestID: uuid.New(), Mode: Redeliver, Actor: "op"})
	require.NoError(t, err)
	discarded := idOf(t, pool, "state = 'dead' AND aggregate_id = 'discarded'")
	require.NoError(t, pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error { return Discard(context.Background(), tx, discarded) }))

	startDispatcher(t, pool, Config{Workers: 2, Routes: map[string]Route{"d": {Destination: dest}}})
	testwait.Until(t, time.Minute, "both aggregates drained", func() bool { return countWhere(t, pool, "state = 'pending'") == 0 })
	order := map[string][]int{}
	for _, d := range dest.deliveries() {
		order[d.AggregateID] = append(order[d.AggregateID], payloadN(d.Payload))
	}
	require.Equal(t, []int{0, 1, 2}, order["replayed"], "the replayed head first, then the rest in order")
	require.Equal(t, []int{1, 2}, order["discarded"], "the rest of the discarded head's aggregate")
	blocked, err = BlockedAggregates(context.Background(), pool, 10)
	require.NoError(t, err)
	require.Empty(t, blocked)
	requireDeadLetterGroupsMatch(t, pool)

	restore := func() error {
		return pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error { return Restore(context.Background(), tx, discarded) })
	}
	require.NoError(t, restore())
	require.ErrorIs(t, restore(), ErrNotDiscarded)
	// A message whose dead-letter group is gone restores just the same.
	require.NoError(t, pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error { return Discard(context.Background(), tx, discarded) }))
	_, err = pool.Exec(context.Background(), `DELETE FROM switchyard.dead_letter_groups`)
	require.NoError(t, err)
	require.NoError(t, restore())
	require.Equal(t, 1, countWhere(t, pool, "id = $1 AND state = 'dead'", discarded))
	_, err = pool.Exec(context.Background(), `INSERT INTO switchyard.dead_letter_groups
		(fingerprint, dead, first_dead_at, last_dead_at, sample_id, destinations)
		SELECT error_fingerprint, count(*) FILTER (WHERE state = 'dead' AND replays = 0), min(finished_at), max(finished_at), max(id), array_agg(DISTINCT destination)
		FROM switchyard.outbox WHERE state IN ('dead', 'discarded') GROUP BY error_fingerprint`)
	require.NoError(t, err)
	require.Equal(t, 1, countWhere(t, pool, "id = $1 AND state = 'dead'", discarded))
	requireDeadLetterGroupsMatch(t, pool)
}
