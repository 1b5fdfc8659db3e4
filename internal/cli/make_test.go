package cli

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
			stopDemo(t, cmd.Process.Pid, keys, exited)
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

// stopDemo stops a `make demo` that the test left running (it failed
// before make exited), and returns once every process it started is gone:
// make, the console and the embedded PostgreSQL, which runs in the data
// directory that the next cleanup removes. The terminal (script) started
// make in a session of its own, so signalling script's process group
// reaches none of them: Ctrl-C is typed first, as the test does, which
// stops the console and its PostgreSQL cleanly; whatever still runs 30 s
// later is killed, each process by its id.
func stopDemo(t *testing.T, script int, keys io.Writer, exited <-chan error) {
	started := descendants(script)
	_, _ = keys.Write([]byte{0x03})
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Errorf("make demo still running 30 s after Ctrl-C; killing what it started")
		for _, pid := range append(descendants(script), script) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		testwait.For(t, 30*time.Second, "the terminal exits after SIGKILL", exited)
	}
	testwait.Until(t, 30*time.Second, "every process make demo started has exited", func() bool {
		for _, pid := range started {
			if processAlive(pid) {
				return false
			}
		}
		return true
	})
}

// descendants lists the processes below pid (children, their children...),
// read from /proc.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// After the command name, in parentheses: state, then parent pid.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 {
			continue
		}
		if parent, err := strconv.Atoi(fields[1]); err == nil {
			children[parent] = append(children[parent], child)
		}
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}
