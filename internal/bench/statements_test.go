package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
)

func TestStatementsSinceMergesOneNameAndKeepsTheCostliest(t *testing.T) {
	t.Parallel()
	start := statementSample{
		1: {Calls: 100, ExecMs: 300, Buffers: 1000, WALRecords: 700},
		2: {Calls: 5, ExecMs: 2},
	}
	end := statementSample{
		// One statement under two queryids (the enqueue's first calls of
		// a run): reported once, both parts summed.
		1: {Name: "OutboxInsert", Calls: 150, ExecMs: 330, Buffers: 1500, WALRecords: 1050, WALBytes: 99},
		3: {Name: "OutboxInsert", Calls: 10, ExecMs: 20, Buffers: 50, WALRecords: 70, WALBytes: 1},
		// Not run during the phase: left out.
		2: {Name: "OutboxAnalyze", Calls: 5, ExecMs: 2},
		4: {Name: "OutboxFinalize", Calls: 7, Plans: 2, ExecMs: 80.04, PlanMs: 3.06},
	}
	for i := range 10 {
		end[int64(100+i)] = serverStatement{Name: fmt.Sprintf("cheap %d", i), Calls: 1, ExecMs: float64(i) / 10}
	}
	got := statementsSince(start, end)
	require.Len(t, got, serverStatementsShown)
	require.Equal(t, serverStatement{Name: "OutboxFinalize", Calls: 7, Plans: 2, ExecMs: 80, PlanMs: 3.1}, got[0])
	require.Equal(t, serverStatement{Name: "OutboxInsert", Calls: 60, ExecMs: 50, Buffers: 550, WALRecords: 420, WALBytes: 100}, got[1])
	require.Equal(t, "cheap 9", got[2].Name)
	require.Equal(t, "cheap 4", got[7].Name)

	require.Nil(t, statementsSince(nil, end), "no figures without a sample at the start")
	require.Nil(t, statementsSince(start, nil))
}

func TestStatementNameIsTheSqlcNameOrTheStatementsStart(t *testing.T) {
	t.Parallel()
	require.Equal(t, "OutboxClaimOrdered", statementName("-- name: OutboxClaimOrdered :many\nWITH due AS (SELECT 1)"))
	require.Equal(t, "SELECT EXISTS (SELECT $1 FROM switchyard.outbox)", statementName("  SELECT EXISTS (SELECT $1\n\t FROM switchyard.outbox)"))
	long := statementName("INSERT INTO switchyard.outbox (message_id, topic, destination, aggregate_type) VALUES ($1, $2, $3, $4)")
	require.Equal(t, "INSERT INTO switchyard.outbox (message_id, topic, destinatio", long, "its first 60 characters")
}

// Without the extension in the database read, the bench reports no
// statements and goes on: the test cluster has none.
func TestSampleStatementsWithoutTheExtensionIsNoSample(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	var created bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements')`).Scan(&created))
	require.False(t, created, "a test database has no pg_stat_statements")
	for _, withText := range []bool{false, true} {
		s, err := sampleStatements(ctx, pool, pool.Config().ConnConfig.Database, withText)
		require.NoError(t, err)
		require.Nil(t, s)
	}
}
