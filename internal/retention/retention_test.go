package retention

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// setup returns a pool on a fresh database and a Config with one-hour ages
// and batches of 2, so that every delete below takes several batches.
func setup(t *testing.T) (*pgxpool.Pool, Config) {
	t.Helper()
	return dbtest.New(t), Config{InboxEvents: time.Hour, BreakerEvents: time.Hour, ReplayJobs: time.Hour, BatchSize: 2, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	_, err := pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

func strings(t *testing.T, pool *pgxpool.Pool, sql string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

func TestExpiredIdempotencyKeysGo(t *testing.T) {
	t.Parallel()
	pool, cfg := setup(t)
	exec(t, pool, `INSERT INTO switchyard.idempotency_keys (principal, key, request_fingerprint, status, expires_at)
		SELECT 'user:1', 'old-' || i, 'fp', 'done', now() - interval '1 second' FROM generate_series(1, 5) i`)
	exec(t, pool, `INSERT INTO switchyard.idempotency_keys (principal, key, request_fingerprint, status, expires_at) VALUES
		('user:1', 'young', 'fp', 'done', now() + interval '1 hour'),
		('user:1', 'in-flight', 'fp', 'in_flight', now() + interval '1 hour')`)
	p, err := Prune(context.Background(), pool, cfg)
	require.NoError(t, err)
	require.Equal(t, Pruned{IdempotencyKeys: 5}, p)
	require.ElementsMatch(t, []string{"young", "in-flight"}, strings(t, pool, `SELECT key FROM switchyard.idempotency_keys`))
}

func TestOnlyOldSettledInboxEventsGo(t *testing.T) {
	t.Parallel()
	pool, cfg := setup(t)
	for _, status := range []string{"processed", "stale", "failed", "parked", "held"} {
		for _, age := range []string{"2 hours", "10 minutes"} {
			exec(t, pool, `INSERT INTO switchyard.inbox_events (source, event_id, payload, status, received_at)
				VALUES ('s', $1 || ' ' || $2, '{}', $1, now() - $2::interval)`, status, age)
		}
	}
	exec(t, pool, `INSERT INTO switchyard.inbox_events (source, event_id, payload, status, received_at)
		SELECT 's', 'bulk ' || i, '{}', 'processed', now() - interval '1 day' FROM generate_series(1, 5) i`)
	p, err := Prune(context.Background(), pool, cfg)
	require.NoError(t, err)
	require.Equal(t, Pruned{InboxEvents: 7}, p)
	require.ElementsMatch(t, []string{
		"processed 10 minutes", "stale 10 minutes",
		"failed 2 hours", "failed 10 minutes", "parked 2 hours", "parked 10 minutes", "held 2 hours", "held 10 minutes",
	}, strings(t, pool, `SELECT event_id FROM switchyard.inbox_events`))
}

func TestOldBreakerEventsGoButEachBreakersLatestStays(t *testing.T) {
	t.Parallel()
	pool, cfg := setup(t)
	exec(t, pool, `INSERT INTO switchyard.breaker_events (destination, owner, from_state, to_state, changed_at) VALUES
		('a', 'd1', 'closed', 'open', now() - interval '5 hours'),
		('a', 'd1', 'open', 'half_open', now() - interval '4 hours'),
		('a', 'd1', 'half_open', 'closed', now() - interval '3 hours'),
		('a', 'd2', 'closed', 'open', now() - interval '5 hours'),
		('b', 'd1', 'closed', 'open', now() - interval '5 hours'),
		('b', 'd1', 'open', 'closed', now() - interval '10 minutes')`)
	p, err := Prune(context.Background(), pool, cfg)
	require.NoError(t, err)
	require.Equal(t, Pruned{BreakerEvents: 3}, p)
	require.ElementsMatch(t, []string{"a d1 closed", "a d2 open", "b d1 closed"},
		strings(t, pool, `SELECT destination || ' ' || owner || ' ' || to_state FROM switchyard.breaker_events`))
}

func TestOnlyOldFinishedReplayJobsGo(t *testing.T) {
	t.Parallel()
	pool, cfg := setup(t)
	insert := `INSERT INTO switchyard.replay_jobs (filter, filter_key, mode, actor, reason, rate_per_sec, upper_id, state, created_at, finished_at)
		VALUES ('{}', $1, 'redeliver', 'alice', $1, 10, 0, $2, now() - interval '1 day', now() - $3::interval)`
	exec(t, pool, insert, "old done", "done", "2 hours")
	exec(t, pool, insert, "old cancelled", "cancelled", "2 hours")
	exec(t, pool, insert, "young done", "done", "10 minutes")
	exec(t, pool, `INSERT INTO switchyard.replay_jobs (filter, filter_key, mode, actor, reason, rate_per_sec, upper_id, created_at)
		VALUES ('{}', 'running', 'redeliver', 'alice', 'running', 10, 0, now() - interval '1 day')`)
	p, err := Prune(context.Background(), pool, cfg)
	require.NoError(t, err)
	require.Equal(t, Pruned{ReplayJobs: 2}, p)
	require.ElementsMatch(t, []string{"young done", "running"}, strings(t, pool, `SELECT reason FROM switchyard.replay_jobs`))
}

// The service prunes at start and on its interval; Stop is idempotent.
func TestServicePrunesUntilStopped(t *testing.T) {
	t.Parallel()
	pool, cfg := setup(t)
	cfg.Interval = 20 * time.Millisecond
	s := New(pool, cfg)
	require.NoError(t, s.Start(context.Background()))
	require.Error(t, s.Start(context.Background()), "a second Start is refused")
	exec(t, pool, `INSERT INTO switchyard.idempotency_keys (principal, key, request_fingerprint, status, expires_at)
		VALUES ('user:1', 'old', 'fp', 'done', now() - interval '1 second')`)
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM switchyard.idempotency_keys`).Scan(&n)
		return err == nil && n == 0
	}, 30*time.Second, 10*time.Millisecond, "a later pass deleted the expired key")
	s.Stop()
	s.Stop()
}
