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

// A small `console bench triage` run, as the built binary (the clients
// run in a child process of it), prints the keys BENCHMARKS.md reads.
func TestBenchTriageSmall(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, consoleBinary, "bench", "triage", "--database-url", dbtest.NewURL(t),
		"--clients", "3", "--mutations", "6", "--rate", "50")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, t.Output()
	require.NoError(t, cmd.Run())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	t.Log(lines[len(lines)-1])
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &res), "the last line is one JSON object")
	for _, k := range []string{"clients", "mutations", "p50_ms", "p99_ms", "rss_bytes_per_client"} {
		require.Contains(t, res, k)
	}
	require.Positive(t, res["received"], "the clients received the item's states")
	require.GreaterOrEqual(t, res["p99_ms"], res["p50_ms"])
}
