package reconcile

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/service"
	"github.com/switchyard/switchyard/internal/testlog"
	"github.com/switchyard/switchyard/internal/testwait"
)

// driftRows is the size of the table drift is injected into (the issue's
// 100,000). The table is seeded with one INSERT from generate_series, the
// provider without encoding a map per entity (PutJSON), the provider is
// asked in process (inProcessRunner: no JSON for 100,000 entities each
// way), and batches are big (driftBatch), so that the test takes seconds,
// not a minute, under the race detector on a loaded machine.
const (
	driftRows  = 100_000
	driftBatch = 5_000
)

// Drift of every kind at random positions in 100,000 rows is found
// within one cycle, and nothing else is reported.
func TestCycleFindsEveryInjectedDriftAndNothingElse(t *testing.T) {
	t.Parallel()
	e := setup(t, driftRows)
	want, deleted := injectDrift(t, e, driftRows)
	c := e.tableCheck("orders", driftBatch, 10_000, 30_000)
	// A batch of 5,000 under the race detector on a loaded machine may
	// take longer than the 2 s other tests allow a remote call.
	_, err := e.pool.Exec(context.Background(), "UPDATE switchyard.reconcile_checks SET timeout_ms = 60000 WHERE id = $1", c.ID)
	require.NoError(t, err)
	began := time.Now()
	y := e.runCycle(e.inProcessRunner("a"))
	t.Logf("cycle of %d rows: %v", driftRows, time.Since(began))
	require.Equal(t, "complete", y.State)
	require.Equal(t, int64(driftRows-deleted), y.Examined, "every local key examined once")
	require.Equal(t, y.Examined-50, y.InSync)
	require.Equal(t, []int64{25, 27, 25, 0}, []int64{y.MissingRemote, y.MissingLocal, y.Mismatch, y.Unknown})
	require.Equal(t, want, e.findings(StatusOpen))

	var diff string
	require.NoError(t, e.pool.QueryRow(context.Background(),
		"SELECT diff::text FROM switchyard.reconcile_findings WHERE kind = 'mismatch' LIMIT 1").Scan(&diff))
	require.Contains(t, diff, `"remote": -1`)
}

// The next complete cycle after the drift is gone resolves every finding
// by itself.
func TestNextCycleResolvesHealedDrift(t *testing.T) {
	t.Parallel()
	e := setup(t, 2_000)
	want, _ := injectDrift(t, e, 2_000)
	e.tableCheck("orders", 500, 10_000, 30_000)
	y := e.runCycle(e.runner("a"))
	require.Equal(t, want, e.findings(StatusOpen))

	// Heal the remote: the next cycle sees nothing and resolves everything.
	for key := range want {
		e.remote.Drop(key[len(key)-len(lastWord(key)):])
	}
	e.healOrders()
	require.NoError(t, queries.New(e.pool).ReconcileCheckRunNow(context.Background(), y.CheckID))
	y2 := e.runCycle(e.runner("a"))
	require.Equal(t, "complete", y2.State)
	require.Zero(t, y2.MissingRemote+y2.MissingLocal+y2.Mismatch)
	require.Empty(t, e.findings(StatusOpen))
	require.Len(t, e.findings(StatusResolved), len(want))
}

// injectDrift makes 25 orders of rows missing remotely, 25 mismatched and
// 25 missing locally (deleted here), at random positions, and adds two
// remote-only keys outside the local key range. It returns the findings
// a cycle must report ("kind key") and how many rows it deleted.
func injectDrift(t *testing.T, e *env, rows int) (map[string]bool, int) {
	t.Helper()
	rnd := rand.New(rand.NewPCG(1, 2))
	want := map[string]bool{}
	picked := map[int]bool{}
	pick := func() int {
		for {
			if i := 1 + rnd.IntN(rows); !picked[i] {
				picked[i] = true
				return i
			}
		}
	}
	var deleted []int
	for range 25 {
		i := pick()
		e.remote.Drop(strconv.Itoa(i))
		want[MissingRemote+" "+strconv.Itoa(i)] = true
		j := pick()
		e.remote.Alter(strconv.Itoa(j), "total", -1)
		want[Mismatch+" "+strconv.Itoa(j)] = true
		k := pick()
		deleted = append(deleted, k)
		want[MissingLocal+" "+strconv.Itoa(k)] = true
	}
	// Remote-only keys before the first and after the last local key.
	for _, k := range []int{0, rows + 3} {
		e.remote.Put(strconv.Itoa(k), orderFields(k))
		want[MissingLocal+" "+strconv.Itoa(k)] = true
	}
	_, err := e.pool.Exec(context.Background(), "DELETE FROM public.orders WHERE id = ANY($1)", deleted)
	require.NoError(t, err)
	return want, len(deleted)
}

func lastWord(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ' ' {
			return s[i+1:]
		}
	}
	return s
}

// healOrders makes the provider hold exactly the local orders.
func (e *env) healOrders() {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), "SELECT id FROM public.orders")
	require.NoError(e.t, err)
	defer rows.Close()
	for rows.Next() {
		var id int
		require.NoError(e.t, rows.Scan(&id))
		e.remote.Put(strconv.Itoa(id), orderFields(id))
	}
	require.NoError(e.t, rows.Err())
}

// An outage of the provider in the middle of a cycle: the keys it could
// not check are unknown and reported as unexamined ranges, the cycle is
// incomplete, nothing unchecked counts as in sync, and an open finding
// is not resolved by the incomplete cycle.
func TestOutageMidCycleIsUnknownAndIncomplete(t *testing.T) {
	t.Parallel()
	e := setup(t, 1000)
	e.remote.Drop("500")
	c := e.tableCheck("orders", 100, 10_000, 30_000)
	y1 := e.runCycle(e.runner("a"))
	require.Equal(t, "complete", y1.State)
	require.Equal(t, map[string]bool{"missing_remote 500": true}, e.findings(StatusOpen))

	e.remote.Put("500", orderFields(500)) // healed, but the next cycle cannot tell
	first := e.remote.Calls()
	e.remote.OnCall(func(n int64) {
		if n == first+3 {
			e.remote.SetDown(true)
		}
	})
	require.NoError(t, queries.New(e.pool).ReconcileCheckRunNow(context.Background(), c.ID))
	y := e.runCycle(e.runner("a"))
	require.Equal(t, "incomplete", y.State)
	require.Equal(t, int64(200), y.InSync, "only the two batches answered are in sync")
	require.Equal(t, int64(200), y.Unknown, "two batches failed before the cycle gave up")
	require.Equal(t, int64(400), y.Examined)
	require.JSONEq(t, `[{"after":"200","through":"300"},{"after":"300","through":"400"},{"after":"400","through":"1000"}]`, string(y.Unexamined))
	require.Contains(t, y.LastError, "503")
	require.Equal(t, map[string]bool{"missing_remote 500": true}, e.findings(StatusOpen), "an incomplete cycle resolves nothing")
}

// A runner killed in the middle of a cycle (its context cancelled, no
// cleanup: its lease is left to expire) is taken over by another, which
// resumes from the persisted cursor: the cycle covers every key exactly
// once. Rows inserted during the cycle are covered by the next one, and
// the dead runner's lease version no longer writes anything.
func TestKilledRunnerIsResumedFromTheCursor(t *testing.T) {
	t.Parallel()
	e := setup(t, 5000)
	for _, k := range []string{"7", "2600", "4999"} {
		e.remote.Drop(k)
	}
	c := e.tableCheck("orders", 250, 10_000, 300)
	ctx, kill := context.WithCancel(context.Background())
	e.remote.OnCall(func(n int64) {
		if n == 8 {
			kill()
		}
	})
	ran, err := e.runner("a").RunOnce(ctx)
	require.True(t, ran)
	require.ErrorIs(t, err, context.Canceled)
	e.remote.OnCall(nil)
	mid := e.lastCycle()
	require.Equal(t, "running", mid.State)
	require.Equal(t, "1750", *mid.CursorKey, "seven batches recorded, the eighth lost with the runner")
	require.Equal(t, int64(1750), mid.Examined)

	e.addRowsLocalOnly(5001, 5010) // during the cycle, unknown to the provider
	e.runWhenLeaseFree(e.runner("b"), 10*time.Second)
	y := e.lastCycle()
	require.Equal(t, mid.ID, y.ID, "the same cycle, resumed")
	require.Equal(t, "complete", y.State)
	require.Equal(t, int32(2), y.Runs)
	require.Equal(t, int64(5000), y.Examined, "every key present at the start, once; none added after")
	require.Equal(t, map[string]bool{"missing_remote 7": true, "missing_remote 2600": true, "missing_remote 4999": true}, e.findings(StatusOpen))

	_, err = queries.New(e.pool).ReconcileCycleAdvance(context.Background(), queries.ReconcileCycleAdvanceParams{
		CycleID: y.ID, CheckID: c.ID, LeaseVersion: c.LeaseVersion + 1, Unexamined: []byte("[]"),
	})
	require.Error(t, err, "the killed runner's lease version writes nothing")

	require.NoError(t, queries.New(e.pool).ReconcileCheckRunNow(context.Background(), c.ID))
	y2 := e.runCycle(e.runner("b"))
	require.Equal(t, int64(5010), y2.Examined)
	require.Equal(t, int64(13), y2.MissingRemote, "the rows inserted during the last cycle are covered by this one")
}

func (e *env) addRowsLocalOnly(from, to int) {
	e.t.Helper()
	_, err := e.pool.Exec(context.Background(), `INSERT INTO public.orders (id, status, total)
		SELECT i, 'open', i FROM generate_series($1::int, $2::int) i`, from, to)
	require.NoError(e.t, err)
}

// The remote rate limit holds: the provider never gets more calls in a
// wall-clock second than the rate plus the bucket's one token.
func TestRemoteRateLimitHolds(t *testing.T) {
	t.Parallel()
	e := setup(t, 300)
	e.tableCheck("orders", 10, 20, 30_000)
	y := e.runCycle(e.runner("a"))
	require.Equal(t, "complete", y.State)
	require.Equal(t, int64(30), e.remote.Calls())
	require.Equal(t, int64(30), y.RemoteCalls)
	require.LessOrEqual(t, e.remote.MaxCallsPerSecond(), 21)
}

// A table check refuses identifiers that are not plain lower-case ones
// before any SQL is built.
func TestTableSourceRefusesUnsafeIdentifiers(t *testing.T) {
	t.Parallel()
	for _, bad := range [][]string{
		{"orders; drop table x", "id", "status"}, {"orders", `id"`, "status"}, {"orders", "id", "Status"}, {"orders", "id"},
	} {
		_, err := NewTableSource(nil, "public", bad[0], bad[1], bad[2:])
		require.True(t, errors.Is(err, ErrInvalidCheck), "%v: %v", bad, err)
	}
	s, err := NewTableSource(nil, "public", "orders", "id", []string{"status", "total"})
	require.NoError(t, err)
	require.Contains(t, s.next, `FROM "public"."orders" t`)
}

// A started runner runs due checks by itself; Stop is idempotent and
// leaves no check leased.
func TestStartedRunnerRunsDueChecks(t *testing.T) {
	t.Parallel()
	e := setup(t, 300)
	e.remote.Drop("9")
	e.tableCheck("orders", 100, 1000, 30_000)
	require.ErrorIs(t, NewRunner(e.pool, Config{}).Start(context.Background()), errNoOwner)
	r := NewRunner(e.pool, Config{Owner: "bg", Client: e.client, Poll: 20 * time.Millisecond, Logger: testlog.New(t)})
	require.NoError(t, r.Start(context.Background()))
	require.ErrorIs(t, r.Start(context.Background()), service.ErrStarted, "a runner starts once")
	testwait.Until(t, 20*time.Second, "a complete cycle", func() bool {
		return e.count("SELECT count(*) FROM switchyard.reconcile_cycles WHERE state = 'complete'") > 0
	})
	r.Stop()
	r.Stop()
	require.Equal(t, map[string]bool{"missing_remote 9": true}, e.findings(StatusOpen))
	require.Equal(t, 0, e.count("SELECT count(*) FROM switchyard.reconcile_checks WHERE lease_owner IS NOT NULL"))
}

// A cycle that fails locally (its table dropped under it) is not retried
// in a tight loop: its check waits a minute, its cycle stays running to be
// resumed then.
func TestFailedCycleWaitsBeforeItIsRetried(t *testing.T) {
	t.Parallel()
	e := setup(t, 100)
	e.tableCheck("orders", 10, 10_000, 30_000)
	e.remote.OnCall(func(n int64) {
		if n == 3 {
			_, err := e.pool.Exec(context.Background(), "ALTER TABLE public.orders RENAME TO gone")
			if err != nil {
				t.Errorf("rename: %v", err)
			}
		}
	})
	r := e.runner("a")
	ran, err := r.RunOnce(context.Background())
	require.True(t, ran)
	require.ErrorContains(t, err, "orders")
	ran, err = r.RunOnce(context.Background())
	require.NoError(t, err)
	require.False(t, ran, "the failed check is not due again at once")
	require.Equal(t, "running", e.lastCycle().State)
	require.Equal(t, 1, e.count("SELECT count(*) FROM switchyard.reconcile_checks WHERE next_cycle_at > now() + interval '50 seconds' AND lease_owner IS NULL"))
}
