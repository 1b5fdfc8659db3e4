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

// The replay bench runs in the test's database (the test role may not
// create databases), replays every seeded message once through a job with
// its audit row, reports the keys, and leaves only its audit row.
func TestBenchReplayInPlace(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	cfg := Config{Database: postgres.Config{URL: url}}
	var out bytes.Buffer
	err := Run(context.Background(), cfg, []string{"replay", "--messages", "3000", "--batch", "400", "--heads", "0.2"},
		slog.New(slog.NewTextHandler(t.Output(), nil)), &out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var keys map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &keys), "the last line is one JSON object")
	for _, k := range []string{"messages", "replayed", "seconds", "replays_per_sec", "batch", "rate_per_sec", "settings"} {
		require.Contains(t, keys, k)
	}
	var res replayBenchResult
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &res))
	require.Equal(t, 3000, res.Messages)
	require.Equal(t, int64(3000), res.Replayed)
	require.Equal(t, 600, res.BlockingHeads)
	require.Equal(t, 400, res.Batch)
	require.Positive(t, res.Seconds)
	require.Equal(t, "in_place", res.Database)

	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	defer pool.Close()
	var left, audited int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM switchyard.outbox) + (SELECT count(*) FROM switchyard.replay_jobs) +
		(SELECT count(*) FROM switchyard.outbox_aggregates) + (SELECT count(*) FROM switchyard.dead_letter_groups) +
		(SELECT count(*) FROM switchyard.destinations)`).Scan(&left))
	require.Zero(t, left, "the bench removed its rows")
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM switchyard.audit_log WHERE action = 'replay_job.start'`).Scan(&audited))
	require.Equal(t, 1, audited, "the job was started with its audit row, which stays")
}

func TestBenchReplayRejectsBadArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"replay", "--messages", "0"},
		{"replay", "--heads", "1.5"},
		{"replay", "--rate", "0"},
		{"replay", "--batch", "-1"},
		{"replay", "extra"},
	} {
		cfg := Config{Database: postgres.Config{URL: "postgres://127.0.0.1:1/none"}}
		err := Run(context.Background(), cfg, args, slog.New(slog.DiscardHandler), io.Discard)
		require.Error(t, err, "%q", args)
		require.NotContains(t, err.Error(), "cannot reach the database", "%q is refused before connecting", args)
	}
	cfg := Config{}
	var out bytes.Buffer
	require.NoError(t, Run(context.Background(), cfg, []string{"replay", "-h"}, slog.New(slog.DiscardHandler), &out))
	require.Contains(t, out.String(), "-heads")
}
