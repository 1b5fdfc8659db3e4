package reconcile

import (
	"context"
	"testing"

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
