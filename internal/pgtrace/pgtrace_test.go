package pgtrace_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/pgtrace"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// A statement sent on its own and a pipeline of three are counted apart,
// one round trip each; Reset starts again.
func TestRoundTripsCountStatementsAndPipelines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	config := dbtest.New(t).Config()
	trips := &pgtrace.RoundTrips{}
	config.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(ctx, config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	var one int
	require.NoError(t, pool.QueryRow(ctx, "SELECT 1").Scan(&one))
	b := &pgx.Batch{}
	for range 3 {
		b.Queue("SELECT 1")
	}
	require.NoError(t, pool.SendBatch(ctx, b).Close())
	require.Equal(t, []int64{1, 1, 2}, []int64{trips.Statements(), trips.Pipelines(), trips.Total()})

	trips.Reset()
	require.Zero(t, trips.Total())
}
