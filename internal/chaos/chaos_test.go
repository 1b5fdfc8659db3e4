package chaos_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/chaos"
	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/pgembed"
)

// The 60-second chaos run with a fixed seed: three real dispatcher
// processes and two console instances on an embedded PostgreSQL, every
// fault kind injected at least once, and the history checks find, for the
// webhook and the JetStream destination alike, nothing lost, nothing
// unexpected, no order violation, no message under two keys, no stale
// finalize applied; no inbox event applied twice or lost; every SSE and
// WebSocket client's view equal to the database within 3 s. Sized for a
// busy 2-core machine: 20 business transactions a second.
//
// The run is `console chaos` itself, a child process built without the
// race detector: its proxies carry every byte between five processes and
// PostgreSQL, and its NATS server every JetStream message, which the race
// detector slows past the leases on a loaded machine. The console's own
// code has its race-detected tests in its packages.
func TestChaosRunFixedSeed(t *testing.T) {
	t.Parallel()
	// A directory the server account reaches, so that the cluster is not
	// relocated out of it; removed at the end unless the test failed.
	dir, err := pgembed.MkdirTemp("chaos-test-")
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept for reading: the cluster and the process logs in %s", dir)
			return
		}
		assert.NoError(t, os.RemoveAll(dir))
	})
	binary, err := consoletest.Build(dir)
	require.NoError(t, err, "build the console binary")

	run := exec.Command(binary, "chaos", "--seconds", "60", "--seed", "20261201", "--rate", "20",
		"--data", filepath.Join(dir, "pg"), "--work", filepath.Join(dir, "work"))
	run.Env = []string{"PATH=" + os.Getenv("PATH")}
	var stdout bytes.Buffer
	run.Stdout, run.Stderr = &stdout, t.Output()
	runErr := run.Run()
	lines := bytes.Split(bytes.TrimSpace(stdout.Bytes()), []byte("\n"))
	var s chaos.Summary
	require.NoError(t, json.Unmarshal(lines[len(lines)-1], &s), "the summary, last: %s", stdout.String())
	t.Logf("summary: %s", lines[len(lines)-1])
	assert.NoError(t, runErr, "console chaos exits 0 when the check passed")
	assert.True(t, s.Passed, "failures: %v (process logs in %s)", s.Failures, filepath.Join(dir, "work"))
	assert.Positive(t, s.Messages)
	assert.Zero(t, s.Lost)
	assert.Zero(t, s.Unexpected)
	assert.Zero(t, s.OrderViolations)
	for _, d := range []string{"chaos", "chaos-js"} {
		assert.Positive(t, s.Destinations[d].Messages, "messages to %s", d)
		assert.Zero(t, s.Destinations[d].Lost, "lost at %s", d)
	}
	assert.Positive(t, s.Inbox.Events)
	assert.Positive(t, s.Inbox.Sends, "duplicates sent")
	assert.Zero(t, s.Inbox.DoubleEffects)
	assert.Zero(t, s.Inbox.Lost)
	assert.Positive(t, s.Views.Markers)
	assert.Equal(t, 4, s.Views.Clients)
	assert.Zero(t, s.Views.Mismatched)
	assert.Equal(t, 4, s.Sockets.Clients)
	assert.Zero(t, s.Sockets.Mismatched)
	for kind, n := range s.Faults {
		assert.Positive(t, n, "fault %s injected", kind)
	}
	assert.Len(t, s.Faults, len(chaos.AllFaults))
}
