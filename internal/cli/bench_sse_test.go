package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
)

// A small `console bench sse --dispatch-rate` run, as the built binary (the
// clients run in a child process of it), prints the keys BENCHMARKS.md
// reads, with the achieved delivery rate beside the latencies.
func TestBenchSSEUnderDispatchLoadSmall(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a dispatch load for a few seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, consoleBinary, "bench", "sse", "--database-url", dbtest.NewURL(t),
		"--clients", "3", "--events", "5", "--interval", "50ms", "--dispatch-rate", "200")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, t.Output()
	require.NoError(t, cmd.Run())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	t.Log(lines[len(lines)-1])
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &res), "the last line is one JSON object")
	for _, k := range []string{"clients", "events", "p50_ms", "p99_ms", "rss_bytes_per_client", "dispatch_rate", "dispatch_per_sec", "dispatch_method"} {
		require.Contains(t, res, k)
	}
	require.EqualValues(t, 15, res["received"], "every client received every change")
	require.EqualValues(t, 200, res["dispatch_rate"])
	require.Positive(t, res["dispatch_per_sec"], "messages were delivered while the changes were timed")
	require.GreaterOrEqual(t, res["p99_ms"], res["p50_ms"])
}
