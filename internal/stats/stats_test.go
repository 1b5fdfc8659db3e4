package stats

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testlog"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func setup(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := dbtest.New(t)
	_, err := pool.Exec(context.Background(), `INSERT INTO switchyard.destinations (name, kind) VALUES ('billing', 'function'), ('crm', 'function')`)
	require.NoError(t, err)
	return pool
}

func start(t *testing.T, pool *pgxpool.Pool, owner string) *Service {
	t.Helper()
	s := New(pool, Config{Owner: owner, Logger: testlog.New(t), Interval: 20 * time.Millisecond, RetryInterval: 50 * time.Millisecond})
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(s.Stop)
	return s
}

// waitFor reads the stored snapshot until ok accepts it, for at most 10 s.
func waitFor(t *testing.T, pool *pgxpool.Pool, ok func(Stored) bool) Stored {
	t.Helper()
	r := NewReader(pool, time.Nanosecond)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := r.Get(context.Background())
		require.NoError(t, err)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshot never matched; last: %+v", s)
		}
		waitChange(t, pool)
	}
}

// waitChange blocks until a stats change is appended or 200 ms pass: the
// signal the dashboards wait on, with a short deadline so that a missed
// change is read again.
func waitChange(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `LISTEN switchyard_changes`); err != nil {
		return
	}
	_, _ = conn.Conn().WaitForNotification(ctx)
	_, _ = conn.Exec(context.WithoutCancel(ctx), `UNLISTEN *`)
}

func flow(s Stored, destination, topic string) Flow {
	for _, f := range s.Flows {
		if f.Destination == destination && f.Topic == topic {
			return f
		}
	}
	return Flow{}
}

func TestSnapshotCountsByStateFromIndexesAndStats(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload, attempts, lease_owner, state)
		VALUES ('order.created', 'billing', '', '', '{}', 0, NULL, 'pending'),
		       ('order.created', 'billing', '', '', '{}', 0, NULL, 'pending'),
		       ('order.created', 'billing', 'order', '1', '{}', 1, 'w1', 'pending'),
		       ('order.created', 'billing', '', '', '{}', 2, NULL, 'pending'),
		       ('order.paid', 'crm', '', '', '{}', 3, NULL, 'dead');
		INSERT INTO switchyard.dead_letter_groups (fingerprint, dead, first_dead_at, last_dead_at, sample_id, destinations)
		VALUES ('boom', 1, now(), now(), 1, '{crm}');
		INSERT INTO switchyard.delivery_stats (second, destination, topic, worker, delivered, retried, dead)
		VALUES (date_trunc('second', now()), 'billing', 'order.created', 'w1', 7, 2, 0),
		       (date_trunc('second', now()) - interval '2 hours', 'billing', 'order.created', 'w1', 100, 0, 0);
		INSERT INTO switchyard.breaker_events (destination, owner, from_state, to_state, changed_at)
		VALUES ('crm', 'w1', 'closed', 'open', now());
		INSERT INTO switchyard.dispatchers (owner, host, pid, workers, leases_held) VALUES ('w1', 'h', 1, 4, 1);
		INSERT INTO switchyard.inbox_events (source, event_id, payload, status) VALUES
		    ('shop', 'a', '{}', 'processed'), ('shop', 'b', '{}', 'failed'), ('shop', 'c', '{}', 'parked');
		INSERT INTO switchyard.inbox_duplicates (source, slot, count) VALUES ('shop', 0, 2), ('shop', 3, 1);`)
	require.NoError(t, err)
	start(t, pool, "a")

	s := waitFor(t, pool, func(s Stored) bool { return s.Version > 0 })
	require.Equal(t, Flow{Destination: "billing", Topic: "order.created", Queued: 2, InFlight: 1, Retrying: 1, Delivered: 7, Retried: 2}, flow(s, "billing", "order.created"))
	require.Equal(t, Flow{Destination: "crm", Topic: "order.paid", Dead: 1}, flow(s, "crm", "order.paid"))
	require.EqualValues(t, 1, s.DeadTotal)
	require.NotNil(t, s.OldestPendingAt)
	require.Equal(t, []Breaker{{Destination: "billing"}, {Destination: "crm", State: "open", Owner: "w1", ChangedAt: s.Breakers[1].ChangedAt}}, s.Breakers)
	require.Len(t, s.Dispatchers, 1)
	require.Equal(t, []Inbox{{Source: "shop", Received: 3, Duplicates: 3, Failed: 1, Parked: 1}}, s.Inbox)
	require.Len(t, s.Series.Delivered, SeriesSeconds)
	require.EqualValues(t, 7, s.Series.Delivered[SeriesSeconds-1]+s.Series.Delivered[SeriesSeconds-2])
	require.Equal(t, "a", s.Leader)
	require.EqualValues(t, 5, s.NewestOutboxID)
	require.Zero(t, s.NewestDeliveryUS, "nothing delivered yet")

	// A change shows in a later snapshot; a new dead letter is recounted.
	// Two deliveries, the later one under the lower id.
	latest := time.Date(2026, 12, 7, 10, 0, 0, 123456000, time.UTC)
	// (Committed before the changes the wait below looks for.)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, state, finished_at)
		VALUES ('order.paid', 'crm', '{}', 'delivered', $1), ('order.paid', 'crm', '{}', 'delivered', $1::timestamptz - interval '1 second')`, latest)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('order.created', 'billing', '{}');
		INSERT INTO switchyard.outbox (topic, destination, payload, state) VALUES ('order.paid', 'crm', '{}', 'dead');
		UPDATE switchyard.dead_letter_groups SET dead = dead + 1, last_dead_at = now()`)
	require.NoError(t, err)
	s = waitFor(t, pool, func(s Stored) bool {
		return flow(s, "billing", "order.created").Queued == 3 && flow(s, "crm", "order.paid").Dead == 2
	})
	require.EqualValues(t, 2, s.DeadTotal)
	require.EqualValues(t, 9, s.NewestOutboxID)
	require.Equal(t, latest.UnixMicro(), s.NewestDeliveryUS)
	// The stats event carries the newest id and the latest delivery's
	// time, so a message list needs no read to know that messages arrived
	// above it.
	var newest, delivered int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT (payload->>'newest_outbox_id')::bigint, (payload->>'newest_delivery_us')::bigint
		FROM switchyard.changes WHERE kind = 'stats' AND (payload->>'version')::bigint = $1`, s.Version).Scan(&newest, &delivered))
	require.EqualValues(t, 9, newest)
	require.Equal(t, latest.UnixMicro(), delivered)
}

// TestOneLeaderAndFailover runs three services on one database: exactly one
// writes snapshots; when it stops, another takes over.
func TestOneLeaderAndFailover(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	services := map[string]*Service{}
	for _, owner := range []string{"a", "b", "c"} {
		services[owner] = start(t, pool, owner)
	}
	first := waitFor(t, pool, func(s Stored) bool { return s.Version > 0 })
	var held int
	require.NoError(t, pool.QueryRow(context.Background(), `
		SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid::bigint = ($1::bigint >> 32) AND objid::bigint = ($1::bigint & 4294967295)`, LeaderLockKey).Scan(&held))
	require.Equal(t, 1, held)
	services[first.Leader].Stop()
	// A new leader writes a new snapshot (its first differs from nothing).
	next := waitFor(t, pool, func(s Stored) bool { return s.Leader != first.Leader })
	require.Greater(t, next.Version, first.Version)
}

// countingDB counts the queries a Reader sends.
type countingDB struct {
	*pgxpool.Pool
	rows atomic.Int64
}

func (c *countingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.rows.Add(1)
	return c.Pool.QueryRow(ctx, sql, args...)
}

// TestReaderSharesOneReadAmongViewers: many viewers at once cost one read
// per TTL.
func TestReaderSharesOneReadAmongViewers(t *testing.T) {
	t.Parallel()
	db := &countingDB{Pool: setup(t)}
	r := NewReader(db, time.Hour)
	errs := make(chan error, 100)
	testwait.Together(100, func(int) {
		_, err := r.Get(context.Background())
		errs <- err
	})
	close(errs)
	n := 0
	for err := range errs {
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 100, n)
	require.EqualValues(t, 1, db.rows.Load())
}

// TestReaderRereadsForANewerVersionOrAFreshRead: a viewer told of version
// N never gets an older cached copy.
func TestReaderRereadsForANewerVersionOrAFreshRead(t *testing.T) {
	t.Parallel()
	db := &countingDB{Pool: setup(t)}
	ctx := context.Background()
	r := NewReader(db, time.Hour)
	first, err := r.Get(ctx)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE switchyard.stats_snapshot SET version = version + 1, snapshot = '{"blocked_aggregates": 7}'`)
	require.NoError(t, err)
	cached, err := r.Get(ctx)
	require.NoError(t, err)
	require.Equal(t, first.Version, cached.Version, "within the TTL the cached copy serves")
	newer, err := r.GetAtLeast(ctx, first.Version+1, false)
	require.NoError(t, err)
	require.Equal(t, first.Version+1, newer.Version)
	require.EqualValues(t, 7, newer.Blocked)
	require.EqualValues(t, 2, db.rows.Load())
	_, err = r.GetAtLeast(ctx, 0, true)
	require.NoError(t, err)
	require.EqualValues(t, 3, db.rows.Load(), "fresh reads again")
}

// TestIdleLeaderTouchesTheSnapshot: with nothing new, the leader still
// records that it is alive, without a new version or a change-feed row.
func TestIdleLeaderTouchesTheSnapshot(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	start(t, pool, "a")
	first := waitFor(t, pool, func(s Stored) bool { return s.Version > 0 })
	touched := waitFor(t, pool, func(s Stored) bool { return s.ComputedAt.After(first.ComputedAt) })
	require.Equal(t, first.Version, touched.Version)
	var feed int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM switchyard.changes WHERE kind = 'stats'`).Scan(&feed))
	require.Equal(t, 1, feed)
}
