package bench

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
)

func TestRelationsSinceKeepsTheMostTouched(t *testing.T) {
	t.Parallel()
	start := relationSample{"outbox": {Name: "outbox", Buffers: 100, Read: 10}, "outbox_pkey": {Name: "outbox_pkey", Buffers: 7}}
	end := relationSample{
		"outbox":      {Name: "outbox", Buffers: 400, Read: 15},
		"outbox_pkey": {Name: "outbox_pkey", Buffers: 7},      // untouched: left out
		"inbox":       {Name: "inbox", Buffers: 900, Read: 1}, // new since the start
	}
	for i := range serverRelationsShown {
		name := string(rune('a' + i))
		end[name] = serverRelation{Name: name, Buffers: 1}
	}
	got := relationsSince(start, end)
	require.Len(t, got, serverRelationsShown)
	require.Equal(t, serverRelation{Name: "inbox", Buffers: 900, Read: 1}, got[0])
	require.Equal(t, serverRelation{Name: "outbox", Buffers: 300, Read: 5}, got[1])
	require.Equal(t, "a", got[2].Name, "ties by name")
	require.Nil(t, relationsSince(nil, end))
	require.Nil(t, relationsSince(start, nil))
}

// A backend adds its counters to the server's when it goes idle, at most
// once a second, and when it exits: the sample waits for the exit of the
// backends it is told of, and so holds the work each did last.
func TestSampleRelationsCountsTheLastWorkOfExitedBackends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	reader := openPool(t, url, "relations-reader")
	_, err := reader.Exec(ctx, `CREATE TABLE switchyard.scanned AS SELECT g AS n, repeat('x', 200) AS pad FROM generate_series(1, 20000) g`)
	require.NoError(t, err)
	var pages int64
	require.NoError(t, reader.QueryRow(ctx, `SELECT pg_relation_size('switchyard.scanned') / current_setting('block_size')::int`).Scan(&pages))
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	before, err := sampleRelations(ctx, reader, "relations-worker", time.Second, logger)
	require.NoError(t, err)

	worker := openPool(t, url, "relations-worker")
	conn, err := worker.Acquire(ctx)
	require.NoError(t, err)
	// Three scans back to back: a backend adds its counters at most once
	// a second while it runs, so at least the last of them is counted
	// only when it exits.
	for range 3 {
		_, err := conn.Exec(ctx, `SELECT count(*) FROM switchyard.scanned`)
		require.NoError(t, err)
	}
	conn.Release()
	early, err := sampleRelations(ctx, reader, "relations-worker", 100*time.Millisecond, logger)
	require.NoError(t, err)
	require.Nil(t, early, "no sample while the worker's backend is connected")
	worker.Close()
	after, err := sampleRelations(ctx, reader, "relations-worker", time.Minute, logger)
	require.NoError(t, err)
	got := relationsSince(before, after)
	require.NotEmpty(t, got)
	require.Equal(t, "scanned", got[0].Name)
	require.GreaterOrEqual(t, got[0].Buffers, 3*pages, "all three scans of %d pages", pages)
}

// openPool opens a pool on url whose connections carry application.
func openPool(t *testing.T, url, application string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["application_name"] = application
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}
