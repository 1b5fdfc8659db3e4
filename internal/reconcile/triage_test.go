package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/triage"
)

// Each finding group (a check's findings of one kind) is a triage item,
// created in the transaction that records its first findings; a person's
// resolve or ignore holds while the group's findings are merely seen
// again, and the item reopens when the group drifts again (a resolved
// finding reopens).
func TestFindingGroupsAreTriageItemsThatReopenOnNewDrift(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, 300)
	e.remote.Drop("10")
	e.remote.Alter("20", "total", -1)
	e.remote.Put("1000", orderFields(1000))
	c := e.tableCheck("orders", 100, 10_000, 30_000)
	r := e.runner("a")
	e.runCycle(r)

	items := map[string]triage.Item{}
	for _, kind := range []string{MissingRemote, MissingLocal, Mismatch} {
		it, err := triage.Find(ctx, e.pool, triage.ReconcileFindings, GroupRef("orders", kind))
		require.NoError(t, err, kind)
		require.Equal(t, triage.Open, it.Status)
		require.Equal(t, int64(1), it.Version)
		require.Equal(t, GroupTitle("orders", kind), it.Title)
		var first time.Time
		require.NoError(t, e.pool.QueryRow(ctx, "SELECT first_seen_at FROM switchyard.reconcile_findings WHERE kind = $1", kind).Scan(&first))
		require.True(t, first.Equal(it.CreatedAt), "%s: the item (%v) and its findings (%v) commit in one transaction", kind, it.CreatedAt, first)
		items[kind] = it
	}
	require.Equal(t, 3, count(t, e, "SELECT count(*) FROM switchyard.triage_items"), "one item per drifted group, nothing else")

	alice := operator(t, e, "alice")
	eng := &triage.Engine{Pool: e.pool}
	settle := func(kind string, s triage.Status) {
		a, err := eng.Mutate(ctx, alice, triage.Input{MutationID: uuid.New(), ItemID: items[kind].ID, Op: triage.OpStatus,
			Args: triage.Args{Status: s}, SeenVersion: items[kind].Version})
		require.NoError(t, err)
		require.True(t, a.OK, a.Message)
		items[kind] = *a.Item
	}
	settle(MissingRemote, triage.Resolved)
	settle(Mismatch, triage.Ignored)

	// The same drift seen again is no new drift: the settled items hold.
	next := func() {
		require.NoError(t, queries.New(e.pool).ReconcileCheckRunNow(ctx, c.ID))
		e.runCycle(r)
	}
	next()
	requireItem(t, e, items[MissingRemote], triage.Resolved, items[MissingRemote].Version)
	requireItem(t, e, items[Mismatch], triage.Ignored, items[Mismatch].Version)
	requireItem(t, e, items[MissingLocal], triage.Open, 1)

	// Healed: the findings resolve, the items are left as they are.
	e.remote.Put("10", orderFields(10))
	e.remote.Put("20", orderFields(20))
	e.remote.Drop("1000")
	next()
	require.Empty(t, e.findings(StatusOpen))
	requireItem(t, e, items[MissingRemote], triage.Resolved, items[MissingRemote].Version)

	// The same groups drift again: their findings reopen, so do the items.
	e.remote.Drop("10")
	e.remote.Alter("20", "total", -2)
	next()
	for _, kind := range []string{MissingRemote, Mismatch} {
		got := requireItem(t, e, items[kind], triage.Open, items[kind].Version+1)
		h, err := triage.History(ctx, e.pool, got.ID)
		require.NoError(t, err)
		last := h[len(h)-1]
		require.Equal(t, "reopened", last.Op)
		require.Contains(t, string(last.Detail), "1 reopened "+kind+" findings")
	}
	requireItem(t, e, items[MissingLocal], triage.Open, 1)
}

// requireItem checks an item's status and version and returns it.
func requireItem(t *testing.T, e *env, it triage.Item, status triage.Status, version int64) triage.Item {
	t.Helper()
	got, err := triage.Get(context.Background(), e.pool, it.ID)
	require.NoError(t, err)
	require.Equal(t, status, got.Status, it.Title)
	require.Equal(t, version, got.Version, it.Title)
	return got
}

func operator(t *testing.T, e *env, name string) auth.Principal {
	t.Helper()
	var id int64
	require.NoError(t, e.pool.QueryRow(context.Background(),
		"INSERT INTO switchyard.users (name, role, password_hash) VALUES ($1, 'operator', 'unused') RETURNING id", name).Scan(&id))
	return auth.Principal{UserID: id, Name: name, Role: auth.Operator}
}

func count(t *testing.T, e *env, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), sql).Scan(&n))
	return n
}
