package action_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/reconcile"
	"github.com/switchyard/switchyard/internal/testlog"
	"github.com/switchyard/switchyard/internal/testwait"
)

// killingWorker is the repair worker of a runner killed in the middle of
// its third batch: the batch's repairs are made in its transaction, then
// the runner is stopped (its context cancelled) before the batch's
// progress is recorded, so the whole batch rolls back.
type killingWorker struct {
	bulkreplay.Worker
	mu      sync.Mutex
	batches int
	kill    func()
}

func (w *killingWorker) Work(ctx context.Context, tx pgx.Tx, job bulkreplay.Job, ids []int64) (int, int, error) {
	done, skipped, err := w.Worker.Work(ctx, tx, job, ids)
	w.mu.Lock()
	w.batches++
	third := w.batches == 3
	w.mu.Unlock()
	if err != nil || !third {
		return done, skipped, err
	}
	go w.kill() // Stop waits for this batch: not from its goroutine
	<-ctx.Done()
	return 0, 0, ctx.Err()
}

// A bulk repair job whose runner is killed mid-batch is resumed by
// another runner once the lease expires, and makes exactly one outbox row
// and one audit row per finding; findings repaired by hand meanwhile are
// skipped. Estimate, progress and a second start are checked on the way.
func TestRepairJobResumedAfterAKillMakesOneRowPerFinding(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := drift(t, b, 120, 2) // 60 mismatches
	ctx := context.Background()
	filter := reconcile.FindingFilter{Check: "orders", Kind: reconcile.Mismatch}
	n, err := b.svc.EstimateRepair(ctx, b.pool, b.operator, filter)
	require.NoError(t, err)
	require.Equal(t, int64(60), n)
	_, err = b.svc.RepairFinding(ctx, b.pool, b.operator, action.FindingInput{FindingID: ids[0], Reason: "by hand"})
	require.NoError(t, err)

	job, err := b.svc.StartRepairJob(ctx, b.pool, b.operator, action.RepairJobInput{Filter: filter, Reason: "bulk", RatePerSecond: 1000, RequestID: uuid.New()})
	require.NoError(t, err)
	require.Equal(t, int64(59), job.Estimate)
	_, err = b.svc.StartRepairJob(ctx, b.pool, b.operator, action.RepairJobInput{Filter: filter, Reason: "again", RequestID: uuid.New()})
	requireRefused(t, err, action.KindConflict)

	first := &killingWorker{Worker: action.RepairJobWorker()}
	killed := make(chan struct{})
	r1 := bulkreplay.NewRunner(b.pool, bulkreplay.Config{Owner: "first", LeaseDuration: 500 * time.Millisecond, Poll: 10 * time.Millisecond,
		BatchSize: 7, Logger: testlog.New(t), Workers: map[string]bulkreplay.Worker{bulkreplay.KindRepair: first}})
	first.kill = func() { r1.Stop(); close(killed) }
	require.NoError(t, r1.Start(ctx))
	testwait.For(t, time.Minute, "the first runner killed in its third batch", killed)
	got, err := bulkreplay.Get(ctx, b.pool, job.ID)
	require.NoError(t, err)
	require.Equal(t, "running", got.State)
	require.Equal(t, int64(14), got.Replayed, "two batches recorded, the third lost with the runner")

	r2 := bulkreplay.NewRunner(b.pool, bulkreplay.Config{Owner: "second", LeaseDuration: 500 * time.Millisecond, Poll: 10 * time.Millisecond,
		BatchSize: 7, Logger: testlog.New(t), Workers: map[string]bulkreplay.Worker{bulkreplay.KindRepair: action.RepairJobWorker()}})
	require.NoError(t, r2.Start(ctx))
	defer r2.Stop()
	// Bounds for a loaded machine: under the race detector at load 40 on
	// 2 cores a batch of 7 repairs took up to 6 s.
	testwait.Until(t, 2*time.Minute, "the job resumed and done", func() bool {
		got, err = bulkreplay.Get(ctx, b.pool, job.ID)
		require.NoError(t, err)
		return got.State == "done"
	})
	require.Equal(t, int64(59), got.Replayed)
	require.Equal(t, 60, b.count(t, `SELECT count(*) FROM switchyard.outbox`), "one outbox row per finding")
	require.Equal(t, 60, b.count(t, `SELECT count(DISTINCT aggregate_id) FROM switchyard.outbox`))
	require.Equal(t, 60, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = $1`, reconcile.ActionRepair))
	require.Equal(t, 60, b.count(t, `SELECT count(*) FROM switchyard.reconcile_findings WHERE status = 'repair_requested'`))
	require.Positive(t, b.count(t, `SELECT count(*) FROM switchyard.changes WHERE kind = 'replay_job' AND subject = $1`, job.ID.String()),
		"progress on the change feed")
}
