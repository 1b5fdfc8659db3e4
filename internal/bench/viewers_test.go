package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/postgres"
)

func TestBenchLiveCommandsRejectBadArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"sse", "--clients", "0"},
		{"sse", "--events", "0"},
		{"sse", "--no-such-flag"},
		{"sse", "--dispatch-rate", "-1"},
		{"viewers", "--viewers", "0"},
		{"viewers", "--rounds", "0"},
		{"sse-clients"},
	} {
		cfg := Config{Database: postgres.Config{URL: "postgres://127.0.0.1:1/none"}}
		err := Run(context.Background(), cfg, args, slog.New(slog.DiscardHandler), io.Discard)
		require.Error(t, err, "%q", args)
		require.NotContains(t, err.Error(), "cannot reach the database", "%q is refused before connecting", args)
	}
}

// A small bench viewers run prints the keys BENCHMARKS.md reads.
func TestBenchViewersSmall(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("drains a backlog twice")
	}
	cfg := Config{Database: postgres.Config{URL: dbtest.NewURL(t)}}
	var out bytes.Buffer
	err := Run(context.Background(), cfg, []string{"viewers", "--viewers", "3", "--messages", "300", "--rounds", "1"}, slog.New(slog.NewTextHandler(t.Output(), nil)), &out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &res))
	for _, k := range []string{"viewers", "messages_per_sec_alone", "messages_per_sec_watched", "ratio"} {
		require.Contains(t, res, k)
	}
	require.Positive(t, res["messages_per_sec_alone"])
	require.Positive(t, res["messages_per_sec_watched"])
	require.Positive(t, res["live_requests"], "the viewers fetched the page")
}
