package inbox

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// setup returns a pool on a fresh database with a test table, effects,
// where the test handlers write their effect.
func setup(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := dbtest.New(t)
	_, err := pool.Exec(context.Background(), `CREATE TABLE effects (id bigint GENERATED ALWAYS AS IDENTITY, event_id text NOT NULL, version bigint)`)
	require.NoError(t, err)
	return pool
}

// writeEffect is a handler that records its call in effects.
func writeEffect(ctx context.Context, tx pgx.Tx, ev Event) error {
	_, err := tx.Exec(ctx, `INSERT INTO effects (event_id, version) VALUES ($1, $2)`, ev.ID, ev.EntityVersion)
	return err
}

// count runs a counting query (test SQL).
func count(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

// status returns an event's status and attempts.
func status(t *testing.T, pool *pgxpool.Pool, source, id string) (string, int) {
	t.Helper()
	var s string
	var attempts int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT status, attempts FROM switchyard.inbox_events WHERE source = $1 AND event_id = $2`, source, id).Scan(&s, &attempts))
	return s, attempts
}

func event(id string) Event {
	return Event{Source: "test", ID: id, Payload: []byte(`{"n": 1}`), Headers: map[string]string{"webhook-id": id}}
}

// atOnce runs receive n times at once and counts the outcomes.
func atOnce(t *testing.T, n int, receive func() (Result, error)) map[Outcome]int {
	t.Helper()
	outcomes := make(chan Outcome, n)
	testwait.Together(n, func(int) {
		res, err := receive()
		if err != nil {
			t.Error(err)
		}
		outcomes <- res.Outcome
	})
	close(outcomes)
	got := map[Outcome]int{}
	for o := range outcomes {
		got[o]++
	}
	return got
}
