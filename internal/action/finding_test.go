package action_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/reconcile"
	"github.com/switchyard/switchyard/internal/reconcile/fakeremote"
	"github.com/switchyard/switchyard/internal/testwait"
)

// drift makes orders 1..n locally and on a fake provider, alters every
// order whose id is a multiple of every on the provider, runs one cycle of
// a table check "orders" and returns the mismatch findings' ids.
func drift(t *testing.T, b bundle, n, every int) []int64 {
	t.Helper()
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `CREATE TABLE public.orders (id bigint PRIMARY KEY, status text NOT NULL);
		INSERT INTO public.orders SELECT i, 'open' FROM generate_series(1, `+strconv.Itoa(n)+`) i`)
	require.NoError(t, err)
	remote := fakeremote.New()
	t.Cleanup(remote.Close)
	for i := 1; i <= n; i++ {
		status := "open"
		if i%every == 0 {
			status = "lost"
		}
		remote.Put(strconv.Itoa(i), map[string]any{"status": status})
	}
	_, err = queries.New(b.pool).ReconcileCheckInsert(ctx, queries.ReconcileCheckInsertParams{
		Name: "orders", Kind: reconcile.KindTable, BatchSize: 100, RemoteRate: 10_000, TimeoutMs: 2000, IntervalMs: 3600000,
		RemoteUrl: remote.URL(), Destination: "billing", Topic: "order.state", WindowMs: 86400000,
		TableSchema: "public", TableName: "orders", KeyColumn: "id", Columns: []string{"status"}, LeaseMs: 30_000,
	})
	require.NoError(t, err)
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	ran, err := reconcile.NewRunner(b.pool, reconcile.Config{Owner: "t", Client: client, Attempts: 2, Backoff: time.Millisecond}).RunOnce(ctx)
	require.NoError(t, err)
	require.True(t, ran)
	ids, err := reconcile.OpenFindings(ctx, b.pool, reconcile.FindingFilter{Check: "orders"}, 0, n)
	require.NoError(t, err)
	require.Len(t, ids, n/every)
	return ids
}

// Repair clicked many times by many operators at once makes one outbox
// row and one audit row per finding; every click gets that row.
func TestRepairFindingOnceWhateverTheClicks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := drift(t, b, 20, 5)
	const clicks = 10
	var fresh, existing atomic.Int64
	rows := sync.Map{}
	testwait.Together(len(ids)*clicks, func(k int) {
		id, i := ids[k/clicks], k%clicks // operator i clicks on finding id
		a := action.Actor{AccountID: int64(10 + i), Name: fmt.Sprintf("op%d", i), Role: b.operator.Role}
		r, err := b.svc.RepairFinding(context.Background(), b.pool, a, action.FindingInput{FindingID: id, Reason: "customer asked"})
		if err != nil {
			t.Errorf("repair %d: %v", id, err)
			return
		}
		if prev, loaded := rows.LoadOrStore(id, r.MessageID); loaded && prev != r.MessageID {
			t.Errorf("finding %d answered with rows %d and %d", id, prev, r.MessageID)
		}
		if r.Existing {
			existing.Add(1)
		} else {
			fresh.Add(1)
		}
	})
	require.Equal(t, int64(len(ids)), fresh.Load())
	require.Equal(t, int64(len(ids)*(clicks-1)), existing.Load())
	require.Equal(t, len(ids), b.count(t, `SELECT count(*) FROM switchyard.outbox`))
	require.Equal(t, len(ids), b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = $1 AND request_id IS NOT NULL`, reconcile.ActionRepair))
}

// The finding actions refuse with the kinds of every action and leave no
// footprint; ignore is audited once and then refused.
func TestFindingRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := drift(t, b, 10, 5)
	before := b.footprint(t)
	_, err := b.svc.RepairFinding(context.Background(), b.pool, b.viewer, action.FindingInput{FindingID: ids[0], Reason: "r"})
	require.Equal(t, b.operator.Role, requireRefused(t, err, action.KindForbidden).Need)
	_, err = b.svc.RepairFinding(context.Background(), b.pool, b.operator, action.FindingInput{FindingID: ids[0], Reason: " "})
	require.Equal(t, "reason", requireRefused(t, err, action.KindInvalid).Field)
	_, err = b.svc.RepairFinding(context.Background(), b.pool, b.operator, action.FindingInput{FindingID: 1 << 40, Reason: "r"})
	requireRefused(t, err, action.KindNotFound)
	require.Equal(t, before, b.footprint(t))

	require.NoError(t, b.svc.IgnoreFinding(context.Background(), b.pool, b.operator, action.FindingInput{FindingID: ids[0], Reason: "known"}))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = $1`, reconcile.ActionIgnore))
	err = b.svc.IgnoreFinding(context.Background(), b.pool, b.operator, action.FindingInput{FindingID: ids[0], Reason: "again"})
	requireRefused(t, err, action.KindConflict)
	_, err = b.svc.RepairFinding(context.Background(), b.pool, b.operator, action.FindingInput{FindingID: ids[0], Reason: "r"})
	requireRefused(t, err, action.KindConflict)
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM switchyard.outbox`))
}

// A bulk repair in parts (Limit) says when more are left, and a retry
// repairs nothing twice.
func TestRepairFindingsInParts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	drift(t, b, 30, 3)
	in := action.RepairFindingsInput{Filter: reconcile.FindingFilter{Check: "orders"}, Reason: "in parts", Limit: 4}
	var parts []action.RepairFindingsResult
	for {
		r, err := b.svc.RepairFindings(context.Background(), b.pool, b.operator, in)
		require.NoError(t, err)
		parts = append(parts, r)
		if !r.More {
			break
		}
	}
	require.Equal(t, []action.RepairFindingsResult{{Repaired: 4, More: true}, {Repaired: 4, More: true}, {Repaired: 2}}, parts)
	require.Equal(t, 10, b.count(t, `SELECT count(*) FROM switchyard.outbox`))
	_, err := b.svc.RepairFindings(context.Background(), b.pool, b.operator, action.RepairFindingsInput{Reason: "r"})
	require.Equal(t, "check", requireRefused(t, err, action.KindInvalid).Field)
}
