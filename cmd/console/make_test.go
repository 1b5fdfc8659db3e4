package main

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/testwait"
)

// TestMakeDemoStopsLikeSuccess runs `make demo` in a terminal, as a
// newcomer would (script(1) gives it one), and types Ctrl-C: make exits 0
// without an error line, and the log says the embedded PostgreSQL stopped
// (issue 14, item 16).
func TestMakeDemoStopsLikeSuccess(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"make", "script"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed: %v", tool, err)
		}
	}
	addr := consoletest.FreeAddr(t)
	// script -e: exit with make's status; -f: flush as output arrives.
	cmd := exec.Command("script", "-qefc", "make --no-print-directory demo", "/dev/null")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "SWITCHYARD_DATA="+filepath.Join(dataParent(t), "demo"), "SWITCHYARD_LISTEN="+addr)
	cmd.Env = append(cmd.Env, "DATABASE_URL=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	keys, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	done := false // set once make exited; read by the cleanup, both on the test's goroutine
	t.Cleanup(func() {
		if !done {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	// The first run builds the binary: minutes on a cold cache.
	testwait.Until(t, 5*time.Minute, "make demo serves /healthz", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	_, err = keys.Write([]byte{0x03}) // Ctrl-C, typed into the terminal
	require.NoError(t, err)
	err = testwait.For(t, time.Minute, "make demo exits after Ctrl-C", exited)
	done = true
	t.Log(out.String())
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("make demo exited %d after Ctrl-C, want 0", exit.ExitCode())
	}
	require.NoError(t, err)
	require.NotContains(t, out.String(), "make: ***")
	require.Contains(t, out.String(), "embedded postgres stopped")
	require.Contains(t, out.String(), "console stopped")
}
