// Package consoletest runs the console binary as a real process for tests
// that check what only a process shows: signals, kill -9, exit codes, and
// pages served to a real browser. It builds the binary, starts it with a
// clean environment, keeps its stderr (and puts its last lines in the log
// of a test that failed), waits for readiness, and stops it when the test
// ends.
package consoletest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PrebuiltEnv names the environment variable through which `make test`
// hands the tests a console binary that it builds once, while the test
// binaries compile: built by each package that runs the console (e2e,
// internal/cli, internal/chaos) at the same moment, the same packages were
// compiled once per package. It holds the binary's path; the build writes
// the path with ".failed" appended, holding its output, when it fails.
const PrebuiltEnv = "CONSOLE_TEST_BINARY"

// Build compiles ./cmd/console into dir and returns the binary's path, or
// returns the binary named by PrebuiltEnv once its build has finished.
func Build(dir string) (string, error) {
	if path := os.Getenv(PrebuiltEnv); path != "" {
		return waitPrebuilt(path, 10*time.Minute)
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("consoletest: cannot locate the repository")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	bin := filepath.Join(dir, "console")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/console")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("consoletest: go build ./cmd/console: %w\n%s", err, out)
	}
	return bin, nil
}

// waitPrebuilt waits for the build behind PrebuiltEnv: another process
// writes the binary (or its failure), so the file is what there is to
// watch.
func waitPrebuilt(path string, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	for {
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
		if out, err := os.ReadFile(path + ".failed"); err == nil {
			return "", fmt.Errorf("consoletest: the console build for the tests (%s) failed:\n%s", PrebuiltEnv, out)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("consoletest: %s=%s: no binary after %v", PrebuiltEnv, path, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Process is a running console. Its exit status is in ProcessState once
// Exited is closed.
type Process struct {
	URL    string // base URL when started by Serve, e.g. http://127.0.0.1:41234
	Addr   string // the --listen address when started by Serve
	cmd    *exec.Cmd
	stdout *buffer
	stderr *buffer
	exited chan struct{}
}

// Start starts binary with args, with our environment minus the console's
// own settings plus env, and returns at once. When the test ends a process
// still running gets SIGTERM, and SIGKILL 10 s later.
func Start(t testing.TB, binary string, env []string, args ...string) *Process {
	t.Helper()
	p := &Process{stdout: &buffer{}, stderr: &buffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	// Audit checkpoints default to the data directory, which is the
	// working directory's .switchyard with DATABASE_URL: keep them out of
	// the source tree.
	p.cmd.Env = append(append(cleanEnv(), "SWITCHYARD_AUDIT_CHECKPOINT_FILE="+filepath.Join(t.TempDir(), "audit-checkpoints.jsonl")), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("consoletest: start %s: %v", binary, err)
	}
	go func() {
		_ = p.cmd.Wait() // the status is in ProcessState
		close(p.exited)
	}()
	// Cleanups run last first: the log's tail is written once the process
	// has been stopped, so it holds the shutdown too.
	t.Cleanup(func() { p.logTailIfFailed(t) })
	t.Cleanup(func() { p.terminate(t) })
	return p
}

// Serve starts `binary --listen <free port> args...` and returns once
// /readyz answers 200; it fails the test if the process exits first or is not
// ready within a minute.
func Serve(t testing.TB, binary string, env []string, args ...string) *Process {
	t.Helper()
	addr := FreeAddr(t)
	p := Start(t, binary, env, append([]string{"--listen", addr}, args...)...)
	p.Addr, p.URL = addr, "http://"+addr
	p.WaitReady(t, time.Minute)
	return p
}

// WaitReady polls /readyz until it answers 200.
func (p *Process) WaitReady(t testing.TB, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for !p.ready(ctx) {
		select {
		case <-p.exited:
			t.Fatalf("console (pid %d) exited before it was ready (%v)", p.Pid(), p.cmd.ProcessState)
		case <-ctx.Done():
			t.Fatalf("console (pid %d) not ready within %v", p.Pid(), limit)
		case <-tick.C:
		}
	}
}

func (p *Process) ready(ctx context.Context) bool {
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

// Signal sends sig to the process.
func (p *Process) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("consoletest: send %v: %v", sig, err)
	}
}

// WaitExit waits up to limit for the process to exit and returns its exit
// code (-1 if a signal ended it).
func (p *Process) WaitExit(t testing.TB, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(limit):
		t.Fatalf("console (pid %d) still running after %v", p.Pid(), limit)
		return -1
	}
}

// Stop sends SIGTERM and fails the test unless the process exits with
// status 0 within 30 s: what a clean shutdown must look like.
func (p *Process) Stop(t testing.TB) {
	t.Helper()
	select {
	case <-p.exited:
		t.Errorf("console (pid %d) exited before it was stopped (%v)", p.Pid(), p.cmd.ProcessState)
		return
	default:
	}
	p.Signal(t, syscall.SIGTERM)
	if code := p.WaitExit(t, 30*time.Second); code != 0 {
		t.Errorf("console (pid %d) exited with %d after SIGTERM", p.Pid(), code)
	}
}

// Exited is closed once the process has exited: a test that must see it
// still running checks it without waiting.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stdout is everything the process wrote to stdout so far.
func (p *Process) Stdout() string { return p.stdout.String() }

// Stderr is everything the process wrote to stderr so far.
func (p *Process) Stderr() string { return p.stderr.String() }

func (p *Process) terminate(t testing.TB) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Errorf("console still running 10s after SIGTERM; killing it")
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// FreeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("consoletest: find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// cleanEnv is our environment without the settings that would change what
// the console under test does.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "SWITCHYARD_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// buffer keeps what a process writes, for assertions and for the log of a
// failed test.
type buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// logTailLines is how much of a process's stderr a failed test's log gets:
// enough to see what the console did last, little enough that the failure
// message above it is not cut from a CI report.
const logTailLines = 60

// logTailIfFailed puts the last lines of the process's stderr in the log of
// a test that failed.
func (p *Process) logTailIfFailed(t testing.TB) {
	if !t.Failed() {
		return
	}
	lines := strings.Split(strings.TrimRight(p.Stderr(), "\n"), "\n")
	shown := lines[max(0, len(lines)-logTailLines):]
	t.Logf("console (pid %d, %s): the last %d of %d lines of its stderr:\n%s",
		p.Pid(), strings.Join(p.cmd.Args[1:], " "), len(shown), len(lines), strings.Join(shown, "\n"))
}
