package changefeed

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testlog"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// collector records what a subscriber received and signals each batch.
type collector struct {
	mu      sync.Mutex
	changes []Change
	got     chan struct{} // one pending signal: something arrived
}

func newCollector() *collector { return &collector{got: make(chan struct{}, 1)} }

func (c *collector) receive(batch []Change) {
	c.mu.Lock()
	c.changes = append(c.changes, batch...)
	c.mu.Unlock()
	select {
	case c.got <- struct{}{}:
	default:
	}
}

func (c *collector) snapshot() []Change {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Change(nil), c.changes...)
}

// waitFor waits until at least n changes arrived, or fails after limit.
func (c *collector) waitFor(t *testing.T, n int, limit time.Duration) []Change {
	t.Helper()
	deadline := time.After(limit)
	for {
		if got := c.snapshot(); len(got) >= n {
			return got
		}
		select {
		case <-c.got:
		case <-deadline:
			t.Fatalf("timed out after %v: %d of %d changes delivered", limit, len(c.snapshot()), n)
		}
	}
}

// start starts l, logging to the test's log, and stops it when the test
// ends.
func start(t *testing.T, l *Listener) {
	t.Helper()
	l.cfg.Logger = testlog.New(t)
	require.NoError(t, l.Start(context.Background()))
	t.Cleanup(l.Stop)
}

// appendCommitted appends changes with the given subjects in one committed
// transaction.
func appendCommitted(t *testing.T, pool *pgxpool.Pool, kind string, subjects ...string) {
	t.Helper()
	require.NoError(t, pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		for _, s := range subjects {
			if err := Append(context.Background(), tx, Change{Kind: kind, Subject: s, Payload: json.RawMessage(`{"n":1}`)}); err != nil {
				return err
			}
		}
		return nil
	}))
}

func subjects(changes []Change) []string {
	out := make([]string, len(changes))
	for i, c := range changes {
		out[i] = c.Subject
	}
	return out
}

// requireResumable checks that changes, as one subscriber received them,
// are each delivered once and that the position after each one is a
// resumable cursor: it includes exactly the changes received up to it.
func requireResumable(t *testing.T, changes []Change) {
	t.Helper()
	seen := map[Cursor]int{}
	for i, ch := range changes {
		j, twice := seen[ch.Cursor]
		require.False(t, twice, "change %s delivered at %d and %d", ch.Cursor, j, i)
		seen[ch.Cursor] = i
	}
	for i, ch := range changes {
		for _, other := range changes {
			require.Equal(t, seen[other.Cursor] <= i, ch.Position.Has(other.Cursor),
				"position %s after change %d and change %s delivered at %d", ch.Position, i, other.Cursor, seen[other.Cursor])
		}
		if i > 0 {
			require.True(t, changes[i-1].Position.Within(ch.Position), "positions %s then %s", changes[i-1].Position, ch.Position)
		}
	}
}

// listenerPIDs returns the backends LISTENing on the feed's channel in the
// pool's database (test SQL).
func listenerPIDs(t *testing.T, pool *pgxpool.Pool) []int32 {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%LISTEN `+channel+`%' AND pid <> pg_backend_pid()`)
	require.NoError(t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	return pids
}
