package chaos_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/chaos"
	"github.com/switchyard/switchyard/internal/pgembed"
	"github.com/switchyard/switchyard/internal/testlog"
)

// The 60-second chaos run with a fixed seed: three real dispatcher
// processes on an embedded PostgreSQL, every fault kind injected at least
// once, and the history check finds nothing lost, nothing unexpected, no
// order violation, no message under two keys, no stale finalize applied.
// Sized for a busy 2-core machine: 20 business transactions a second.
func TestChaosRunFixedSeed(t *testing.T) {
	t.Parallel()
	// A directory the server account reaches, so that the cluster is not
	// relocated out of it; removed at the end.
	dir, err := pgembed.MkdirTemp("chaos-test-")
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, os.RemoveAll(dir)) })
	binary := filepath.Join(dir, "console")
	build := exec.Command("go", "build", "-o", binary, "github.com/switchyard/switchyard/cmd/console")
	build.Stderr = t.Output()
	require.NoError(t, build.Run(), "build the console binary")

	s, err := chaos.Run(context.Background(), chaos.Config{
		Binary: binary, Seconds: 60, Seed: 20261201, Rate: 20,
		DataDir: filepath.Join(dir, "pg"), WorkDir: filepath.Join(dir, "work"),
		Env:    []string{"PATH=" + os.Getenv("PATH")},
		Logger: testlog.New(t),
	})
	require.NoError(t, err)
	t.Logf("summary: %+v", s)
	assert.True(t, s.Passed, "failures: %v (process logs in %s)", s.Failures, filepath.Join(dir, "work"))
	assert.Positive(t, s.Messages)
	assert.Zero(t, s.Lost)
	assert.Zero(t, s.Unexpected)
	assert.Zero(t, s.OrderViolations)
	for kind, n := range s.Faults {
		assert.Positive(t, n, "fault %s injected", kind)
	}
	assert.Len(t, s.Faults, len(chaos.AllFaults))
}
