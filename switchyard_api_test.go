package switchyard_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard"
	"github.com/switchyard/switchyard/internal/dbtest"
)

// A batch with one invalid message writes nothing and leaves the caller's
// transaction usable: its business change still commits.
func TestEnqueueManyIsAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address) VALUES ('d', 'webhook', 'https://d.invalid/')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE business (n int)`)
	require.NoError(t, err)
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO business VALUES (1)`)
		require.NoError(t, err)
		_, err = switchyard.EnqueueMany(ctx, tx, []switchyard.Message{
			{Topic: "t", Destination: "d", Payload: []byte(`{}`)},
			{Topic: "t", Destination: "d", Payload: []byte(`{not json`)},
		})
		require.ErrorIs(t, err, switchyard.ErrInvalidMessage)
		_, err = switchyard.Enqueue(ctx, tx, switchyard.Message{Topic: "t", Destination: "nowhere", Payload: []byte(`{}`)})
		require.ErrorIs(t, err, switchyard.ErrUnknownDestination)
		require.ErrorIs(t, err, switchyard.ErrInvalidMessage)
		return nil
	})
	require.NoError(t, err)
	var business, messages int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM business), (SELECT count(*) FROM switchyard.outbox)`).Scan(&business, &messages))
	require.Equal(t, 1, business)
	require.Zero(t, messages)
}

// A handler's error rolls its writes back, is recorded, and parks the
// event after MaxAttempts; the handler sees the event as given.
func TestReceiveRecordsAFailedHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	_, err := pool.Exec(ctx, `CREATE TABLE effects (n int)`)
	require.NoError(t, err)
	payload := []byte(`{"z": 1, "a": 2.50}`)
	failing := func(ctx context.Context, tx pgx.Tx, ev switchyard.Event) error {
		if !bytes.Equal(ev.Payload, payload) || ev.Source != "s" || ev.ID != "e1" || ev.MaxAttempts != 2 {
			return errors.New("the handler got another event")
		}
		if _, err := tx.Exec(ctx, `INSERT INTO effects VALUES (1)`); err != nil {
			return err
		}
		return errors.New("refused")
	}
	ev := switchyard.Event{Source: "s", ID: "e1", Payload: payload, MaxAttempts: 2}
	res, err := switchyard.Receive(ctx, pool, ev, failing)
	require.ErrorIs(t, err, switchyard.ErrHandler)
	require.Equal(t, switchyard.OutcomeFailed, res.Outcome)
	res, err = switchyard.Receive(ctx, pool, ev, failing)
	require.ErrorIs(t, err, switchyard.ErrHandler)
	require.Equal(t, switchyard.OutcomeParked, res.Outcome)
	require.Equal(t, 2, res.Attempts)
	var effects int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM effects`).Scan(&effects))
	require.Zero(t, effects)
	_, err = switchyard.Receive(ctx, pool, switchyard.Event{Source: "s", Payload: payload}, failing)
	require.ErrorIs(t, err, switchyard.ErrInvalidEvent)
}

// A command line that cannot run is refused before anything starts.
func TestRunRefusesAnInvalidCommandLine(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	err := switchyard.Run(context.Background(), switchyard.Config{
		Args: []string{"serve", "--workers", "-1"}, Getenv: func(string) string { return "" }, Stderr: &stderr,
	})
	require.ErrorContains(t, err, "invalid workers")
}
