package e2e

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
)

// consoleProcess is a console binary started by startConsole on a database
// of its own. It is stopped when the test ends.
type consoleProcess struct {
	URL    string // base URL, e.g. http://127.0.0.1:41234
	cmd    *exec.Cmd
	output *logWriter
	exited chan struct{} // closed once the process has exited and its output is drained
}

// startConsole starts the console on a fresh database and a free port, and
// returns once /readyz answers 200. Its output goes to the test log. When the
// test ends it gets SIGTERM (SIGKILL 10 s later) and must exit with status 0.
func startConsole(t *testing.T) *consoleProcess {
	t.Helper()
	// First, so that its cleanup (dropping the database) runs after the
	// process is stopped: cleanups run last-in, first-out.
	dbURL := dbtest.NewURL(t)
	s := useSuite(t)
	addr := freeAddr(t)
	p := &consoleProcess{
		URL:    "http://" + addr,
		output: newLogWriter(t, 30),
		exited: make(chan struct{}),
	}
	p.cmd = exec.Command(s.binary, "--listen", addr)
	p.cmd.Env = append(consoleEnv(), "DATABASE_URL="+dbURL)
	// One writer for both: exec copies them with one goroutine, which Wait
	// waits for (at most WaitDelay after the process exits).
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	p.cmd.WaitDelay = 5 * time.Second
	require.NoError(t, p.cmd.Start(), "start the console")
	go func() {
		_ = p.cmd.Wait() // the exit status is in ProcessState
		p.output.flush()
		close(p.exited)
	}()
	t.Cleanup(func() { p.stop(t) })
	p.waitReady(t, 60*time.Second)
	return p
}

// waitReady polls /readyz until it answers 200, the process exits or limit
// passes.
func (p *consoleProcess) waitReady(t *testing.T, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for !p.ready(ctx) {
		select {
		case <-p.exited:
			t.Fatalf("console exited before it was ready (%v); its last output:\n%s", p.cmd.ProcessState, p.output.tail())
		case <-ctx.Done():
			t.Fatalf("console not ready within %v; its last output:\n%s", limit, p.output.tail())
		case <-tick.C:
		}
	}
}

func (p *consoleProcess) ready(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/readyz", nil)
	if err != nil {
		return false
	}
	req.Close = true // keep no idle connection (and its goroutines) behind
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// stop sends SIGTERM, waits for the exit (killing after 10 s) and checks
// that the console stopped cleanly.
func (p *consoleProcess) stop(t *testing.T) {
	select {
	case <-p.exited:
		t.Errorf("console exited before the test ended (%v); its last output:\n%s", p.cmd.ProcessState, p.output.tail())
		return
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("send SIGTERM to the console: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Errorf("console still running 10s after SIGTERM; killing it")
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	if !p.cmd.ProcessState.Success() {
		t.Errorf("console exited with %v after SIGTERM; its last output:\n%s", p.cmd.ProcessState, p.output.tail())
	}
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// consoleEnv is our environment without the settings that would change what
// the console under test does.
func consoleEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "SWITCHYARD_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// logWriter passes a process's output to the test log line by line and keeps
// the last lines for failure messages. It is safe for concurrent use.
type logWriter struct {
	t    *testing.T
	keep int

	mu      sync.Mutex
	partial []byte   // guarded by mu: an unfinished last line
	last    []string // guarded by mu: at most keep lines
}

func newLogWriter(t *testing.T, keep int) *logWriter {
	return &logWriter{t: t, keep: keep}
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.line(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
}

// flush logs an unfinished last line.
func (w *logWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 {
		w.line(string(w.partial))
		w.partial = nil
	}
}

func (w *logWriter) line(s string) {
	w.t.Log("console: " + s)
	w.last = append(w.last, s)
	if len(w.last) > w.keep {
		w.last = w.last[len(w.last)-w.keep:]
	}
}

func (w *logWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.last, "\n")
}
