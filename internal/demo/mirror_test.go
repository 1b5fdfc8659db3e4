package demo

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/reconcile"
	"github.com/switchyard/switchyard/internal/testlog"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// Orders written back to back while cycles of the demo's orders check run
// are no drift: the shop hears of each order once it commits and answers
// no lookup while a transaction of orders is in flight, so no cycle sees
// an order on one side only. (Told inside the transaction, an order in
// flight was in the answer to a cycle's last, open-ended batch and not in
// the table: missing_local, about every other cycle.)
func TestOrdersWrittenDuringCyclesAreNoDrift(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pool := dbtest.New(t)
	d := New(testlog.New(t), Config{})
	require.NoError(t, d.Prepare(ctx, pool))

	writing, stop := make(chan error, 1), make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				writing <- nil
				return
			default:
			}
			if err := writeOrders(ctx, pool, 2, d.mirror); err != nil {
				writing <- err
				return
			}
		}
	}()
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	r := reconcile.NewRunner(pool, reconcile.Config{Owner: "t", Client: client, Logger: testlog.New(t)})
	const cycles = 30
	for range cycles {
		dueNow(t, pool)
		for {
			ran, err := r.RunOnce(ctx)
			require.NoError(t, err)
			if !ran {
				break
			}
		}
	}
	close(stop)
	require.NoError(t, <-writing)

	var complete, orders, findings int
	require.NoError(t, pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM switchyard.reconcile_cycles y JOIN switchyard.reconcile_checks k ON k.id = y.check_id
		 WHERE k.name = $1 AND y.state = 'complete'),
		(SELECT count(*) FROM switchyard_demo.orders),
		(SELECT count(*) FROM switchyard.reconcile_findings)`, OrdersCheck).Scan(&complete, &orders, &findings))
	require.Equal(t, cycles, complete)
	require.Positive(t, orders, "orders were written while the cycles ran")
	require.Zero(t, findings, "no cycle found drift")
}

// dueNow makes both demo checks due.
func dueNow(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), "UPDATE switchyard.reconcile_checks SET next_cycle_at = now()")
	require.NoError(t, err)
}
