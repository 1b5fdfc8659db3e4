package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/postgres"
)

// The inbox bench runs in the test's database (the test role may not create
// databases), checks its own effect, reports the keys, and leaves
// no row behind.
func TestBenchInboxInPlace(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	cfg := Config{Database: postgres.Config{URL: url}}
	var out bytes.Buffer
	err := Run(context.Background(), cfg, []string{"inbox", "--events", "600", "--duplicates", "0.2", "--concurrency", "8"},
		slog.New(slog.NewTextHandler(t.Output(), nil)), &out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var keys map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &keys), "the last line is one JSON object")
	for _, k := range []string{"events", "duplicates", "events_per_sec", "p50_ms", "p99_ms", "settings"} {
		require.Contains(t, keys, k)
	}
	var res inboxBenchResult
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &res))
	require.Equal(t, 600, res.Events)
	require.Positive(t, res.Duplicates)
	require.Less(t, res.Duplicates, 600)
	require.Positive(t, res.EventsPerSec)
	require.GreaterOrEqual(t, res.P99Ms, res.P50Ms)
	require.Equal(t, "in_place", res.Database)

	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	defer pool.Close()
	var left int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM switchyard.inbox_events) + (SELECT count(*) FROM switchyard.inbox_duplicates) +
		(SELECT count(*) FROM pg_namespace WHERE nspname = 'switchyard_demo')`).Scan(&left))
	require.Zero(t, left, "the bench removed its rows, and the demo schema it installed")
}

func TestBenchInboxRejectsBadArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"inbox", "--events", "0"},
		{"inbox", "--duplicates", "1"},
		{"inbox", "--concurrency", "0"},
		{"inbox", "extra"},
	} {
		cfg := Config{Database: postgres.Config{URL: "postgres://127.0.0.1:1/none"}}
		err := Run(context.Background(), cfg, args, slog.New(slog.DiscardHandler), io.Discard)
		require.Error(t, err, "%q", args)
		require.NotContains(t, err.Error(), "cannot reach the database", "%q is refused before connecting", args)
	}
	cfg := Config{}
	var out bytes.Buffer
	require.NoError(t, Run(context.Background(), cfg, []string{"inbox", "-h"}, slog.New(slog.DiscardHandler), &out))
	require.Contains(t, out.String(), "-duplicates")
}
