package bulkreplay

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/testlog"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// setup returns a pool on a fresh database holding dead messages: n of
// them, those with an even n failing with fingerprint "even", the others
// with "odd".
func setup(t *testing.T, n int) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.New(t)
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind) VALUES ('d', 'function')`)
	require.NoError(t, err)
	var msgs []outbox.Message
	for i := range n {
		msgs = append(msgs, outbox.Message{Topic: "t", Destination: "d", Payload: fmt.Appendf(nil, `{"n": %d}`, i)})
	}
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := outbox.Enqueue(ctx, tx, msgs...)
		return err
	}))
	_, err = pool.Exec(ctx, `UPDATE switchyard.outbox SET state = 'dead', finished_at = now(), last_error = 'HTTP 422: rejected',
		error_fingerprint = CASE WHEN (payload->>'n')::int % 2 = 0 THEN 'even' ELSE 'odd' END`)
	require.NoError(t, err)
	return pool
}

func start(t *testing.T, pool *pgxpool.Pool, s Spec) (Job, error) {
	t.Helper()
	var job Job
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		job, err = Start(context.Background(), tx, s)
		return err
	})
	return job, err
}

func runner(t *testing.T, pool *pgxpool.Pool, cfg Config) *Runner {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testlog.New(t)
	}
	r := NewRunner(pool, cfg)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(r.Stop)
	return r
}

func count(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func waitJob(t *testing.T, pool *pgxpool.Pool, job Job, what string, done func(Job) bool) Job {
	t.Helper()
	var j Job
	testwait.Until(t, time.Minute, what, func() bool {
		var err error
		j, err = Get(context.Background(), pool, job.ID)
		require.NoError(t, err)
		return done(j)
	})
	return j
}

// A job replays every dead message its filter matches, once each, and
// only those; its progress reaches the change feed; the estimate agrees.
func TestJobReplaysEveryMatchingMessageOnce(t *testing.T) {
	t.Parallel()
	pool := setup(t, 60)
	f := Filter{Fingerprint: "even"}
	estimate, err := Estimate(context.Background(), pool, f)
	require.NoError(t, err)
	require.Equal(t, Matches{N: 30}, estimate)
	job, err := start(t, pool, Spec{Filter: f, Mode: outbox.Redeliver, Actor: "ann", RatePerSecond: 1000, Estimate: estimate.N})
	require.NoError(t, err)
	runner(t, pool, Config{BatchSize: 7, Poll: 10 * time.Millisecond})

	job = waitJob(t, pool, job, "the job done", func(j Job) bool { return j.State == "done" })
	require.Equal(t, int64(30), job.Replayed)
	require.Zero(t, job.Skipped)
	require.Equal(t, 30, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of IS NOT NULL`))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM (SELECT replay_of FROM switchyard.outbox
		WHERE replay_of IS NOT NULL GROUP BY replay_of HAVING count(*) > 1) twice`), "one replay per message")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchyard.outbox r JOIN switchyard.outbox o ON o.id = r.replay_of
		WHERE o.error_fingerprint <> 'even'`), "only the filter's messages")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchyard.changes WHERE kind = 'replay_job'
		AND subject = $1 AND payload->>'state' = 'done' AND (payload->>'replayed')::int = 30`, job.ID.String()))
}

// One running job per filter; a different filter may run beside it.
func TestOneRunningJobPerFilter(t *testing.T) {
	t.Parallel()
	pool := setup(t, 4)
	first, err := start(t, pool, Spec{Filter: Filter{Fingerprint: "odd"}, Mode: outbox.Redeliver, Actor: "ann"})
	require.NoError(t, err)
	again, err := start(t, pool, Spec{Filter: Filter{Fingerprint: "odd"}, Mode: outbox.Redeliver, Actor: "bob"})
	require.ErrorIs(t, err, ErrAlreadyRunning)
	require.Equal(t, first.ID, again.ID, "the running job is returned")
	_, err = start(t, pool, Spec{Filter: Filter{Fingerprint: "even"}, Mode: outbox.Redeliver, Actor: "bob"})
	require.NoError(t, err)
	_, err = start(t, pool, Spec{Filter: Filter{Topic: "t"}, Mode: outbox.Reapply, Actor: "bob"})
	require.ErrorIs(t, err, ErrReasonRequired)
	for _, rate := range []int{-1, MaxRatePerSecond + 1, 1 << 40} {
		_, err = start(t, pool, Spec{Filter: Filter{Topic: "t"}, Mode: outbox.Redeliver, Actor: "bob", RatePerSecond: rate})
		require.ErrorIs(t, err, ErrInvalidRate, "rate %d", rate)
	}
}

// Cancel stops a job between batches: what it replayed stays, nothing more
// is replayed, and a new job for the filter may start.
func TestCancelStopsTheJob(t *testing.T) {
	t.Parallel()
	pool := setup(t, 40)
	job, err := start(t, pool, Spec{Filter: Filter{}, Mode: outbox.Redeliver, Actor: "ann", RatePerSecond: 10})
	require.NoError(t, err)
	r := runner(t, pool, Config{Poll: 10 * time.Millisecond})
	waitJob(t, pool, job, "some progress", func(j Job) bool { return j.Replayed > 0 })
	var cancelled bool
	require.NoError(t, pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		cancelled, err = Cancel(context.Background(), tx, job.ID)
		return err
	}))
	require.True(t, cancelled)
	r.Stop() // returns once no batch is in progress
	job, err = Get(context.Background(), pool, job.ID)
	require.NoError(t, err)
	require.Equal(t, "cancelled", job.State)
	require.Less(t, job.Replayed, int64(40))
	require.Equal(t, int(job.Replayed), count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of IS NOT NULL`),
		"nothing replayed after the cancel")
	_, err = start(t, pool, Spec{Filter: Filter{}, Mode: outbox.Redeliver, Actor: "ann"})
	require.NoError(t, err, "the filter is free again")
}

// A job whose runner stops (or dies) is resumed by another runner once its
// lease expires, from its cursor, and still replays each message once.
func TestJobResumesAfterRestart(t *testing.T) {
	t.Parallel()
	pool := setup(t, 50)
	job, err := start(t, pool, Spec{Filter: Filter{}, Mode: outbox.Redeliver, Actor: "ann", RatePerSecond: 25})
	require.NoError(t, err)
	first := NewRunner(pool, Config{LeaseDuration: 300 * time.Millisecond, Poll: 10 * time.Millisecond, BatchSize: 5})
	require.NoError(t, first.Start(context.Background()))
	waitJob(t, pool, job, "some progress", func(j Job) bool { return j.Replayed >= 10 })
	first.Stop()

	runner(t, pool, Config{LeaseDuration: 300 * time.Millisecond, Poll: 10 * time.Millisecond, BatchSize: 5})
	job = waitJob(t, pool, job, "the job done", func(j Job) bool { return j.State == "done" })
	require.Equal(t, int64(50), job.Replayed)
	require.Equal(t, 50, count(t, pool, `SELECT count(DISTINCT replay_of) FROM switchyard.outbox WHERE replay_of IS NOT NULL`))
	require.Equal(t, 50, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of IS NOT NULL`), "none twice")
}

// Replays that die again are not picked up by the job that made them: it
// ends instead of looping, and the messages say how often they were
// replayed.
func TestJobDoesNotLoopOnReplaysThatDieAgain(t *testing.T) {
	t.Parallel()
	pool := setup(t, 10)
	ctx := context.Background()
	job, err := start(t, pool, Spec{Filter: Filter{Fingerprint: "odd"}, Mode: outbox.Redeliver, Actor: "ann", RatePerSecond: 1000})
	require.NoError(t, err)
	// Every replay dies at once, as if its destination still refused it.
	_, err = pool.Exec(ctx, `CREATE FUNCTION kill_replays() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN NEW.state := 'dead'; NEW.finished_at := now(); NEW.error_fingerprint := 'odd'; RETURN NEW; END $$;
		CREATE TRIGGER kill_replays BEFORE INSERT ON switchyard.outbox FOR EACH ROW
		WHEN (NEW.replay_of IS NOT NULL) EXECUTE FUNCTION kill_replays();`)
	require.NoError(t, err)
	runner(t, pool, Config{BatchSize: 2, Poll: 10 * time.Millisecond})
	job = waitJob(t, pool, job, "the job done", func(j Job) bool { return j.State == "done" })
	require.Equal(t, int64(5), job.Replayed)
	require.Equal(t, 5, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of IS NOT NULL AND state = 'dead' AND generation = 1`))
}

// Lease fencing: a runner whose lease was taken over (another runner
// claimed the job after it expired) commits nothing of its batch.
func TestBatchOfAStaleLeaseChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, 10)
	_, err := start(t, pool, Spec{Filter: Filter{}, Mode: outbox.Redeliver, Actor: "ann", RatePerSecond: 1000})
	require.NoError(t, err)
	r := NewRunner(pool, Config{})
	job, err := queries.New(pool).ReplayJobClaim(ctx, queries.ReplayJobClaimParams{Owner: "stale", LeaseSeconds: 30, Kinds: []string{KindReplay}})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE switchyard.replay_jobs SET lease_version = lease_version + 1, lease_owner = 'next'`)
	require.NoError(t, err)

	p, state, err := r.batch(ctx, job, replayWorker{}, 5)
	require.NoError(t, err)
	require.Empty(t, state, "the batch saw its lease lost")
	require.Equal(t, 5, p.replayed, "it replayed, then rolled back")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of IS NOT NULL OR replays > 0`))
	require.Zero(t, count(t, pool, `SELECT cursor_id + replayed FROM switchyard.replay_jobs`))
}

// A job over ordered messages unblocks the aggregates whose dead heads it
// replays, keeps the dead-letter groups' counts, and wakes the dispatchers
// (a NOTIFY on their channel) after its batches commit.
func TestJobUnblocksAggregatesAndWakesDispatchers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, 0)
	var msgs []outbox.Message
	for n := range 30 {
		msgs = append(msgs, outbox.Message{Topic: "t", Destination: "d", AggregateType: "order",
			AggregateID: fmt.Sprintf("%d", n%3), Payload: fmt.Appendf(nil, `{"n": %d}`, n)})
	}
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := outbox.Enqueue(ctx, tx, msgs...)
		return err
	}))
	// Each aggregate's head died and blocks it, as the dispatcher leaves it.
	_, err := pool.Exec(ctx, `
		UPDATE switchyard.outbox SET state = 'dead', finished_at = now(), error_fingerprint = 'f', last_error = 'HTTP 422'
		WHERE aggregate_seq = 1;
		INSERT INTO switchyard.outbox_blocked_aggregates (destination, aggregate_type, aggregate_id, dead_message_id)
		SELECT destination, aggregate_type, aggregate_id, id FROM switchyard.outbox WHERE state = 'dead';
		UPDATE switchyard.outbox_aggregates SET done_seq = 1, due_at = 'infinity';
		INSERT INTO switchyard.dead_letter_groups (fingerprint, dead, first_dead_at, last_dead_at, sample_id)
		SELECT 'f', 3, now(), now(), max(id) FROM switchyard.outbox WHERE state = 'dead'`)
	require.NoError(t, err)

	listener, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer listener.Release()
	_, err = listener.Exec(ctx, "LISTEN switchyard_outbox")
	require.NoError(t, err)
	job, err := start(t, pool, Spec{Filter: Filter{Fingerprint: "f"}, Mode: outbox.Redeliver, Actor: "ann", RatePerSecond: 1000})
	require.NoError(t, err)
	runner(t, pool, Config{Poll: 10 * time.Millisecond})
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = listener.Conn().WaitForNotification(waitCtx)
	require.NoError(t, err, "the dispatchers are woken")

	job = waitJob(t, pool, job, "the job done", func(j Job) bool { return j.State == "done" })
	require.Equal(t, int64(3), job.Replayed)
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchyard.outbox_blocked_aggregates`), "every aggregate unblocked")
	require.Equal(t, 3, count(t, pool, `SELECT count(*) FROM switchyard.outbox_aggregates WHERE done_seq = 0 AND due_at < 'infinity'`),
		"each is due, its replayed head first")
	require.Equal(t, 3, count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of IS NOT NULL AND aggregate_seq = 1`))
	require.Zero(t, count(t, pool, `SELECT dead FROM switchyard.dead_letter_groups WHERE fingerprint = 'f'`))
}
