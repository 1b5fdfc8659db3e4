package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/postgres"
)

func TestBenchPagesRejectsBadArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"pages", "--rows", "10"},
		{"pages", "--dead", "900000"},
		{"pages", "--requests", "0"},
		{"pages", "--fingerprints", "0"},
		{"pages", "extra"},
	} {
		cfg := Config{Database: postgres.Config{URL: "postgres://127.0.0.1:1/none"}}
		err := Run(context.Background(), cfg, args, slog.New(slog.DiscardHandler), io.Discard)
		require.Error(t, err, "%q", args)
		require.NotContains(t, err.Error(), "cannot reach the database", "%q is refused before connecting", args)
	}
}

func TestBenchPagesHelp(t *testing.T) {
	t.Parallel()
	cfg := Config{}
	var out bytes.Buffer
	require.NoError(t, Run(context.Background(), cfg, []string{"pages", "-h"}, slog.New(slog.DiscardHandler), &out))
	require.Contains(t, out.String(), "-rows")
	require.Contains(t, out.String(), "-explain")
}

// Seeding a million rows in place would leave them in someone's database:
// without CREATEDB the bench refuses, and writes nothing.
func TestBenchPagesRefusesInPlace(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	cfg := Config{Database: postgres.Config{URL: url}}
	err := Run(context.Background(), cfg, []string{"pages", "--rows", "1000"}, slog.New(slog.DiscardHandler), io.Discard)
	require.ErrorContains(t, err, "CREATEDB")
}

// A small run through the embedded server (the bench needs a database of
// its own): every page of the console is timed, the dashboard's from a
// snapshot the statistics leader stored of the seeded data, and the inbox's
// from seeded inbound events.
func TestBenchPagesSmall(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts an embedded server")
	}
	cfg := Config{Database: postgres.Config{DataDir: filepath.Join(dataParent(t), "data")}}
	var out bytes.Buffer
	err := Run(context.Background(), cfg, []string{"pages", "--rows", "20000", "--fingerprints", "120", "--requests", "2"}, slog.New(slog.NewTextHandler(t.Output(), nil)), &out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res pagesBenchResult
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &res), "the last line is one JSON object")
	require.Equal(t, 20000, res.Rows)
	for _, page := range []string{"messages", "messages_topic_prefix", "messages_destination_prefix", "messages_stage_in_flight", "messages_leased_by", "message_detail", "dead_letters", "dead_letter_group", "blocked_aggregates",
		"blocked_aggregates_again", "dashboard", "dashboard_live", "inbox", "inbox_failed", "inbox_next", "inbox_event"} {
		require.Contains(t, res.Pages, page)
		require.Positive(t, res.Pages[page].P95Ms, page)
	}
	require.Positive(t, res.StatsSnapshotMs)
	require.Positive(t, res.MaxP95Ms)
}
