package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/postgres"
)

// The reconcile bench runs in the test's database (in place), finds
// exactly the drift it injected, reports the keys, and removes its
// table, check and destination.
func TestBenchReconcileInPlace(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	cfg := Config{Database: postgres.Config{URL: url}}
	var out bytes.Buffer
	// --dispatch 500: the drains show that the rounds alternate and their
	// medians are reported, which no size changes; while a drain runs,
	// full cycles run back to back, so a drain's size is their CPU too.
	err := Run(context.Background(), cfg, []string{"reconcile", "--rows", "5000", "--batch", "250", "--drift", "100", "--dispatch", "500", "--rounds", "2"},
		slog.New(slog.NewTextHandler(t.Output(), nil)), &out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res reconcileBenchResult
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &res), "the last line is one JSON object")
	require.Equal(t, 5000, res.Rows)
	require.Equal(t, int64(50), res.Findings)
	require.Equal(t, int64(20), res.RemoteCalls)
	require.Positive(t, res.RowsPerSec)
	require.Len(t, res.RoundsCycle, 2, "one cycle per round")
	require.Len(t, res.RoundsFloor, 2, "one floor scan per round")
	require.Equal(t, medianOf(res.RoundsCycle), res.RowsPerSec)
	require.Positive(t, res.FloorRowsPerSec)
	require.InDelta(t, res.RowsPerSec/res.FloorRowsPerSec, res.FloorRatio, 0.001)
	require.Equal(t, "in_place", res.Database)
	require.Positive(t, res.DispatchRatio)
	require.Positive(t, res.DispatchAlone)
	require.Len(t, res.DispatchRoundsAlone, 2, "one drain alone per round")
	require.Len(t, res.DispatchRoundsDuring, 2, "one drain during cycles per round")
	require.Equal(t, medianOf(res.DispatchRoundsDuring), res.DispatchDuring)

	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	defer pool.Close()
	var left int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM switchyard.reconcile_checks)
		+ (SELECT count(*) FROM pg_tables WHERE tablename LIKE 'bench_reconcile_%')`).Scan(&left))
	require.Zero(t, left, "the bench removed what it wrote")
}

func TestBenchReconcileFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--rows", "0"}, {"--batch", "10001"}, {"--rate", "0"}, {"--rounds", "0"}, {"extra"}} {
		_, err := parseReconcileBenchOptions(args)
		require.Error(t, err, "%v", args)
	}
	o, err := parseReconcileBenchOptions(nil)
	require.NoError(t, err)
	require.Equal(t, reconcileBenchOptions{rows: 100000, batch: 500, rate: 100000, drift: 1000, rounds: 3, timeout: o.timeout}, o)
	_, err = parseReconcileBenchOptions([]string{"--dispatch", "-1"})
	require.Error(t, err)
}
