package bulkreplay

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/msgfilter"
	"github.com/switchyard/switchyard/internal/outbox"
)

// seedDead writes rows messages in one statement, one a second from start:
// every dead'th one dead (never replayed), the others delivered; topic
// and destination of row i come from topic(i) and destination(i) (SQL
// over i). The table is analyzed, as autovacuum would have.
func seedDead(t *testing.T, rows, dead int, start time.Time, topic, destination string) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.New(t)
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind) VALUES ('x', 'function'), ('y', 'function')`)
	require.NoError(t, err)
	// The sequence trigger numbers aggregates, which these messages have
	// none of: off while seeding, as console bench pages seeds.
	_, err = pool.Exec(ctx, `ALTER TABLE switchyard.outbox DISABLE TRIGGER outbox_assign_seq`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, state, attempts, last_error, error_fingerprint, created_at, finished_at)
		SELECT `+topic+`, `+destination+`, '{}', CASE WHEN i % $2 = 0 THEN 'dead' ELSE 'delivered' END, 1,
			CASE WHEN i % $2 = 0 THEN 'HTTP 503' END, CASE WHEN i % $2 = 0 THEN 'fp' END,
			$3::timestamptz + i * interval '1 s', $3::timestamptz + i * interval '1 s'
		FROM generate_series(1, $1::int) AS i`, rows, dead, start)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ALTER TABLE switchyard.outbox ENABLE TRIGGER outbox_assign_seq`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `VACUUM ANALYZE switchyard.outbox`)
	require.NoError(t, err)
	return pool
}

// Issue 14, item 2: a job with a created window starts at the window's
// first id (less the commit skew the message list allows too) and stops
// at its last, so its first batch does not walk the dead messages before
// the window; it replays the window's messages, no other.
func TestWindowedJobStartsAtTheWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	pool := seedDead(t, 3000, 1, t0, `'order.created'`, `'x'`)
	// Messages 2001 to 2100 (one a second) are inside the window.
	f := Filter{CreatedFrom: t0.Add(2001 * time.Second), CreatedTo: t0.Add(2101 * time.Second)}
	idAt := func(i int) int64 {
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM switchyard.outbox WHERE created_at = $1`, t0.Add(time.Duration(i)*time.Second)).Scan(&id))
		return id
	}
	estimate, err := Estimate(ctx, pool, f)
	require.NoError(t, err)
	require.Equal(t, Matches{N: 100}, estimate)

	job, err := start(t, pool, Spec{Filter: f, Mode: outbox.Redeliver, Actor: "ann", RatePerSecond: 1000, Estimate: estimate.N})
	require.NoError(t, err)
	skew := int(msgfilter.CommitSkew / time.Second)
	require.Equal(t, idAt(2001-skew)-1, job.CursorID, "the job starts at the window, less the commit skew")
	require.Equal(t, idAt(2101+skew), job.UpperID, "and stops at its end, plus the skew")

	runner(t, pool, Config{Poll: 10 * time.Millisecond})
	job = waitJob(t, pool, job, "the job done", func(j Job) bool { return j.State == "done" })
	require.Equal(t, int64(100), job.Replayed)
	require.Equal(t, 100, count(t, pool, `SELECT count(*) FROM switchyard.outbox r JOIN switchyard.outbox o ON o.id = r.replay_of
		WHERE o.created_at >= $1 AND o.created_at < $2`, f.CreatedFrom, f.CreatedTo))
	require.Equal(t, 100, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of IS NOT NULL`))
}

// estimateReading is Estimate of f and the heap blocks of the outbox it
// read: pg_stat_get_xact_blocks_fetched before and after it in one
// transaction (the backend reports its counts only between transactions,
// so they may hold an earlier one's too).
func estimateReading(t *testing.T, pool *pgxpool.Pool, f Filter) (Matches, int64) {
	t.Helper()
	ctx := context.Background()
	var m Matches
	var before, after int64
	const fetched = `SELECT pg_stat_get_xact_blocks_fetched('switchyard.outbox'::regclass)`
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, fetched).Scan(&before); err != nil {
			return err
		}
		var err error
		if m, err = Estimate(ctx, tx, f); err != nil {
			return err
		}
		return tx.QueryRow(ctx, fetched).Scan(&after)
	}))
	return m, after - before
}

// Issue 14, item 3: the estimate before a job reads no more than
// MaxCounted messages. On 50,000 messages, half of them dead: a topic
// prefix that matches most of the dead (a common prefix) is answered from
// the planner ("about"), near the truth, reading no message; a rare one
// is counted exactly; a filter the planner underestimates is counted up
// to MaxCounted ("at least").
func TestEstimateReadsAtMostTheCap(t *testing.T) {
	t.Parallel()
	pool := seedDead(t, 50_000, 2, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		`CASE WHEN i = 6 THEN 'order.audited' WHEN i % 8 < 6 THEN 'order.created' ELSE 'invoice.sent' END`,
		`CASE WHEN i % 4 = 0 THEN 'x' ELSE 'y' END`)
	truth := count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE state = 'dead' AND topic LIKE 'order.%'`)
	require.Equal(t, 18_751, truth)
	pages := count(t, pool, `SELECT relpages FROM pg_class WHERE oid = 'switchyard.outbox'::regclass`)

	common, blocks := estimateReading(t, pool, Filter{Topic: "order."})
	t.Logf("a common prefix: %+v (truth %d), %d blocks read", common, truth, blocks)
	require.True(t, common.About, "the planner's estimate, not a count")
	require.InDelta(t, truth, common.N, float64(truth)/5, "near the truth")
	require.Less(t, blocks, int64(10), "no message read (of %d pages)", pages)

	rare, _ := estimateReading(t, pool, Filter{Topic: "order.aud*"})
	require.Equal(t, Matches{N: 1}, rare, "counted")

	// Every message to x (a quarter of all) is a dead order.created: the
	// planner, taking state, topic and destination as independent,
	// expects fewer than the cap.
	require.Equal(t, 12_500, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE state = 'dead' AND topic LIKE 'order.%' AND destination = 'x'`))
	under, blocks := estimateReading(t, pool, Filter{Topic: "order.", Destination: "x"})
	require.Equal(t, Matches{N: MaxCounted, AtLeast: true}, under, "counted up to the cap")
	t.Logf("a filter the planner underestimates: %d blocks read of %d pages", blocks, pages)
	require.Less(t, blocks, int64(pages), "not every page")
}
