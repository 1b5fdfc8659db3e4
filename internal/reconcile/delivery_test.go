package reconcile

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/queries"
)

// deliveryCheck adds a delivery check of destination "d".
func (e *env) deliveryCheck(name string) int64 {
	e.t.Helper()
	id, err := queries.New(e.pool).ReconcileCheckInsert(context.Background(), queries.ReconcileCheckInsertParams{
		Name: name, Kind: KindDelivery, BatchSize: 50, RemoteRate: 1000, TimeoutMs: 2000, IntervalMs: 3600000,
		RemoteUrl: e.hooks.URL(), Destination: "d", WindowMs: 3600000, Columns: []string{}, LeaseMs: 30000,
	})
	require.NoError(e.t, err)
	return id
}

// delivered writes n messages delivered to "d" (test SQL: the dispatcher's
// end state) and returns their ids and idempotency keys.
func (e *env) delivered(n int) (ids []int64, keys []uuid.UUID) {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `INSERT INTO switchyard.outbox (topic, destination, payload, state, finished_at)
		SELECT 't', 'd', jsonb_build_object('n', i), 'delivered', now() FROM generate_series(1, $1::int) i
		RETURNING id, message_id`, n)
	require.NoError(e.t, err)
	for rows.Next() {
		var id int64
		var key uuid.UUID
		require.NoError(e.t, rows.Scan(&id, &key))
		ids, keys = append(ids, id), append(keys, key)
	}
	require.NoError(e.t, rows.Err())
	return ids, keys
}

// A delivery check finds the deliveries the receiver accepted and lost,
// by their idempotency keys, and only those; messages not delivered or
// outside the window are not its business.
func TestDeliveryCheckFindsLostDeliveries(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	ids, keys := e.delivered(120)
	lost := map[int]bool{3: true, 77: true, 119: true}
	for i, k := range keys {
		if !lost[i] {
			e.hooks.Put(k.String(), nil)
		}
	}
	_, err := e.pool.Exec(context.Background(), `INSERT INTO switchyard.outbox (topic, destination, payload, state, finished_at)
		VALUES ('t', 'd', '{}', 'pending', NULL), ('t', 'd', '{}', 'delivered', now() - interval '2 hours')`)
	require.NoError(t, err)
	e.deliveryCheck("hooks")
	y := e.runCycle(e.runner("a"))
	require.Equal(t, "complete", y.State)
	require.Equal(t, int64(120), y.Examined)
	require.Equal(t, int64(3), y.MissingRemote)
	want := map[string]bool{}
	for i := range lost {
		want[MissingRemote+" "+keys[i].String()] = true
	}
	require.Equal(t, want, e.findings(StatusOpen))
	rows, err := e.pool.Query(context.Background(), "SELECT ref FROM switchyard.reconcile_findings ORDER BY ref")
	require.NoError(t, err)
	refs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Equal(t, []int64{ids[3], ids[77], ids[119]}, refs, "each finding names its message")
}

// A delivery check walks its window by delivery time, then id: messages
// delivered in another order than their ids (retries, many aggregates)
// are each examined once over several batches, and deliveries before the
// window are not examined at all.
func TestDeliveryCheckWalksDeliveriesInTheirOrder(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	ctx := context.Background()
	// 130 deliveries, the newest id delivered first, two at each instant
	// (ties across batches of 50), and 40 before the window.
	rows, err := e.pool.Query(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, state, finished_at)
		SELECT 't', 'd', '{}', 'delivered', now() - make_interval(secs => CASE WHEN i <= 130 THEN (i / 2) ELSE 7200 + i END)
		FROM generate_series(1, 170) i
		RETURNING id, message_id, finished_at >= now() - interval '1 hour'`)
	require.NoError(t, err)
	lost := map[string]bool{}
	n := 0
	for rows.Next() {
		var id int64
		var key uuid.UUID
		var inWindow bool
		require.NoError(t, rows.Scan(&id, &key, &inWindow))
		if n++; n%9 == 0 && inWindow {
			lost[MissingRemote+" "+key.String()] = true
			continue
		}
		e.hooks.Put(key.String(), nil)
	}
	require.NoError(t, rows.Err())
	require.Len(t, lost, 14)
	e.deliveryCheck("hooks")
	y := e.runCycle(e.runner("a"))
	require.Equal(t, "complete", y.State)
	require.Equal(t, int64(130), y.Examined, "each delivery in the window once")
	require.Equal(t, int64(14), y.MissingRemote)
	require.Equal(t, lost, e.findings(StatusOpen))
}

// A cycle begun before migration 00032 stored its cursor and upper bound
// as bare ids: its next page walks the window from its start, to its end.
func TestDeliveryPageAfterABareIDCursor(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	ctx := context.Background()
	ids, _ := e.delivered(30)
	src := deliverySource{pool: e.pool, destination: "d"}
	since := time.Now().Add(-time.Hour)
	after := strconv.FormatInt(ids[10], 10)
	items, err := src.Page(ctx, since, &after, strconv.FormatInt(ids[20], 10), 50)
	require.NoError(t, err)
	require.Len(t, items, 30, "from the window's start to its end")
	require.Equal(t, ids[0], items[0].Ref)
	rest, err := src.Page(ctx, since, &items[9].Cursor, items[29].Cursor, 50)
	require.NoError(t, err)
	require.Len(t, rest, 20, "after a cursor of its own, the rest")
	require.Equal(t, ids[10], rest[0].Ref)
}
