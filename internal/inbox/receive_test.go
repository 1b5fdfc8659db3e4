package inbox

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/advisory"
)

func TestReceiveAppliesOnceAndCountsDuplicates(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	res, err := Receive(ctx, pool, event("e1"), writeEffect)
	require.NoError(t, err)
	require.Equal(t, OutcomeProcessed, res.Outcome)
	for range 3 {
		res, err = Receive(ctx, pool, event("e1"), func(context.Context, pgx.Tx, Event) error {
			t.Error("the handler of a duplicate must not run")
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, OutcomeDuplicate, res.Outcome)
	}
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects`))
	require.Equal(t, 3, count(t, pool, `SELECT sum(count) FROM switchyard.inbox_duplicates WHERE source = 'test'`))
	s, _ := status(t, pool, "test", "e1")
	require.Equal(t, "processed", s)
}

// 50 concurrent deliveries of one event: the effect happens once, and
// every other delivery is a duplicate.
func TestConcurrentDeliveriesApplyOnce(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	const n = 50
	var calls atomic.Int64
	handler := func(ctx context.Context, tx pgx.Tx, ev Event) error {
		calls.Add(1)
		return writeEffect(ctx, tx, ev)
	}
	got := atOnce(t, n, func() (Result, error) { return Receive(context.Background(), pool, event("same"), handler) })
	require.Equal(t, map[Outcome]int{OutcomeProcessed: 1, OutcomeDuplicate: n - 1}, got)
	require.Equal(t, int64(1), calls.Load())
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects`))
	require.Equal(t, n-1, count(t, pool, `SELECT sum(count) FROM switchyard.inbox_duplicates`))
}

// The lost-effect bug (record the event first, apply it later): if the
// apply fails after the record committed, every redelivery is dropped as a
// duplicate and the effect never happens. Here the handler's failure rolls
// the record back with the effect, and the redelivery applies it.
func TestFailedApplyIsRetriedNotLost(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	failing := func(ctx context.Context, tx pgx.Tx, ev Event) error {
		if err := writeEffect(ctx, tx, ev); err != nil {
			return err
		}
		return errors.New("downstream unavailable after writing")
	}
	res, err := Receive(ctx, pool, event("e1"), failing)
	require.ErrorIs(t, err, ErrHandler)
	require.Equal(t, OutcomeFailed, res.Outcome)
	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM effects`), "the effect rolled back with the handler's transaction")
	s, attempts := status(t, pool, "test", "e1")
	require.Equal(t, "failed", s)
	require.Equal(t, 1, attempts)

	res, err = Receive(ctx, pool, event("e1"), writeEffect)
	require.NoError(t, err)
	require.Equal(t, OutcomeProcessed, res.Outcome, "a redelivery of a failed event applies it")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects`))
	s, _ = status(t, pool, "test", "e1")
	require.Equal(t, "processed", s)
}

// The double-effect bug (apply first, record later): if the effect commits
// and the record does not, the redelivery applies it again. Here the
// handler's effect is written, then the transaction fails at COMMIT (a
// deferred foreign key): neither the effect nor the record may survive,
// and the redeliveries apply the effect exactly once.
func TestEffectAndRecordCommitTogether(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE parents (id int PRIMARY KEY);
		CREATE TABLE children (parent int REFERENCES parents DEFERRABLE INITIALLY DEFERRED)`)
	require.NoError(t, err)
	handler := func(ctx context.Context, tx pgx.Tx, ev Event) error {
		if err := writeEffect(ctx, tx, ev); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO children VALUES (1)`) // checked only at COMMIT
		return err
	}
	_, err = Receive(ctx, pool, event("e1"), handler)
	require.Error(t, err, "the commit fails")
	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM effects`))
	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM switchyard.inbox_events`), "a failed commit records nothing")

	_, err = pool.Exec(ctx, `INSERT INTO parents VALUES (1)`)
	require.NoError(t, err)
	for range 3 {
		_, err = Receive(ctx, pool, event("e1"), handler)
		require.NoError(t, err)
	}
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects`))
}

func TestPanicRollsBackIsRecordedAndParksAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	ev := event("e1")
	ev.Policy.MaxAttempts = 3
	panicking := func(ctx context.Context, tx pgx.Tx, ev Event) error {
		if err := writeEffect(ctx, tx, ev); err != nil {
			return err
		}
		panic("handler bug: index out of range [7] with length 3")
	}
	for attempt := 1; attempt <= 3; attempt++ {
		res, err := Receive(ctx, pool, ev, panicking)
		require.ErrorIs(t, err, ErrHandler)
		require.Contains(t, err.Error(), "handler panicked")
		require.Equal(t, attempt, res.Attempts)
		want := OutcomeFailed
		if attempt == 3 {
			want = OutcomeParked
		}
		require.Equal(t, want, res.Outcome)
	}
	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM effects`))
	var lastError, fp string
	require.NoError(t, pool.QueryRow(ctx, `SELECT last_error, error_fingerprint FROM switchyard.inbox_events`).Scan(&lastError, &fp))
	require.Contains(t, lastError, "index out of range")
	require.Len(t, fp, 16)

	res, err := Receive(ctx, pool, ev, writeEffect)
	require.NoError(t, err)
	require.Equal(t, OutcomeDuplicate, res.Outcome, "a parked event waits for an operator")

	res, err = Receive(ctx, pool, event("e2"), writeEffect)
	require.NoError(t, err, "the process keeps receiving")
	require.Equal(t, OutcomeProcessed, res.Outcome)
}

func TestInvalidEventsWriteNothing(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	for _, ev := range []Event{
		{Source: "", ID: "x", Payload: []byte(`{}`)},
		{Source: "s", ID: "", Payload: []byte(`{}`)},
		{Source: "s", ID: "x", Payload: []byte(`{`)},
		{Source: "s", ID: "x", Payload: []byte(`{}`), EntityKey: "k"},
		{Source: "s", ID: "x", Payload: []byte(`{}`), EntityVersion: 3},
		{Source: "s", ID: "x", Payload: []byte(`{}`), Policy: Policy{OutOfOrder: "later"}},
	} {
		_, err := Receive(context.Background(), pool, ev, writeEffect)
		require.ErrorIs(t, err, ErrInvalid)
	}
	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM switchyard.inbox_events`))
}

// Contention is no verdict on the event: a handler whose lock was not
// granted in time, or whose transaction hit a deadlock or serialization
// failure, leaves nothing recorded and no attempt used, and the retry
// applies it.
func TestContentionIsRetriedWithoutUsingAnAttempt(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	for i, cause := range []error{
		fmt.Errorf("create customer: %w", advisory.ErrLockTimeout),
		&pgconn.PgError{Code: "40P01", Message: "deadlock detected"},
		&pgconn.PgError{Code: "40001", Message: "could not serialize access"},
	} {
		ev := event(fmt.Sprint("busy-", i))
		ev.Policy.MaxAttempts = 1 // one recorded failure would park it
		_, err := Receive(ctx, pool, ev, func(ctx context.Context, tx pgx.Tx, ev Event) error {
			if err := writeEffect(ctx, tx, ev); err != nil {
				return err
			}
			return cause
		})
		require.ErrorIs(t, err, ErrTransient)
		require.NotErrorIs(t, err, ErrHandler)
		require.Zero(t, count(t, pool, `SELECT count(*) FROM switchyard.inbox_events WHERE event_id = $1`, ev.ID), "nothing recorded")
		res, err := Receive(ctx, pool, ev, writeEffect)
		require.NoError(t, err)
		require.Equal(t, OutcomeProcessed, res.Outcome, "the retry applies it")
	}
	require.Equal(t, 3, count(t, pool, `SELECT count(*) FROM effects`), "once each")
}

// A payload is stored as sent: key order and whitespace kept, and a \u0000
// escape (valid JSON, which jsonb cannot store) accepted rather than failing
// on every redelivery.
func TestPayloadIsStoredAsSent(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	ev := event("e-raw")
	ev.Payload = []byte(`{"z": 1, "a": "nul \u0000 here"}`)
	res, err := Receive(ctx, pool, ev, writeEffect)
	require.NoError(t, err)
	require.Equal(t, OutcomeProcessed, res.Outcome)
	var stored string
	require.NoError(t, pool.QueryRow(ctx, `SELECT payload::text FROM switchyard.inbox_events WHERE source = 'test' AND event_id = 'e-raw'`).Scan(&stored))
	require.Equal(t, string(ev.Payload), stored)
}
