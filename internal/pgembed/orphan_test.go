package pgembed

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A console killed with kill -9 releases its lock but may leave its server
// running. The next Start must stop that orphan and come up on the same data.
func TestStartStopsAnOrphanedServer(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	orphan := startCluster(t, cfg)
	exec1(t, orphan, "CREATE TABLE survived (id int)")
	orphanPID := orphan.cmd.Process.Pid
	orphan.releaseLock() // what the kernel does when the owner dies

	c := startCluster(t, cfg)
	select {
	case <-orphan.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the orphaned server was not stopped")
	}
	require.NotEqual(t, orphanPID, c.cmd.Process.Pid)
	exec1(t, c, "INSERT INTO survived VALUES (1)")
}

// A postmaster killed with SIGKILL leaves a stale postmaster.pid, and
// children that outlive it, attached to its shared memory, for a moment:
// here for as long as the test wants, since one of them is frozen. The next
// Start waits for them and recovers the data. The crash itself is reported
// by Exited, Err and Stop.
func TestRecoversAfterThePostmasterIsKilled(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	// A commit must reach the kernel before it returns, or the crash loses it.
	delete(cfg.Settings, "synchronous_commit")
	crashed, err := Start(context.Background(), cfg)
	require.NoError(t, err)
	killed := false
	t.Cleanup(func() {
		if err := crashed.Stop(); err != nil && !killed {
			t.Errorf("stop cluster: %v", err)
		}
	})
	exec1(t, crashed, "CREATE TABLE survived (id int); INSERT INTO survived VALUES (7)")
	require.NoError(t, crashed.Err(), "no error while the server runs")

	killed = true
	child := killPostmaster(t, crashed)
	require.ErrorContains(t, crashed.Err(), "postgres exited unexpectedly (signal: killed)")
	require.FileExists(t, filepath.Join(cfg.DataDir, "postmaster.pid"), "a killed server leaves its pid file")
	crashed.releaseLock() // as if the console had died with its server

	waiting := make(chan struct{})
	cfg.Logger = slog.New(&notifyHandler{Handler: cfg.Logger.Handler(), msg: "waiting for the processes of a crashed server to exit", ch: waiting})
	go func() {
		select {
		case <-waiting:
			_ = syscall.Kill(child, syscall.SIGCONT)
		case <-t.Context().Done():
		}
	}()
	c := startCluster(t, cfg)
	require.Equal(t, 7, queryInt(t, c, "SELECT id FROM survived"))
	select {
	case <-waiting:
	default:
		t.Fatal("Start did not wait for the crashed server's child")
	}
	require.NoError(t, c.Stop())
	require.ErrorContains(t, crashed.Stop(), "signal: killed", "Stop reports the crash")
}

// killPostmaster freezes one of c's children, so that it outlives the
// postmaster, kills the postmaster with SIGKILL and returns the child.
func killPostmaster(t *testing.T, c *Cluster) int {
	t.Helper()
	child := childOf(t, c.cmd.Process.Pid)
	require.NoError(t, syscall.Kill(child, syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGCONT) })
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	select {
	case <-c.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("Exited not closed after the server was killed")
	}
	return child
}

// childOf returns a child process of pid.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		if child, err := strconv.Atoi(e.Name()); err == nil && readProcess(child).ppid == pid {
			return child
		}
	}
	t.Fatalf("process %d has no child", pid)
	return 0
}

// notifyHandler closes ch when a record with message msg is logged.
type notifyHandler struct {
	slog.Handler
	msg  string
	ch   chan struct{}
	once sync.Once
}

func (h *notifyHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.ch) })
	}
	return h.Handler.Handle(ctx, r)
}

func TestStalePidFileOfAnotherProgramIsReplaced(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	first := startCluster(t, cfg)
	require.NoError(t, first.Stop())
	// Our own pid is alive and is not postgres: exactly the pid-reuse case.
	writePidFile(t, cfg.DataDir, os.Getpid())
	startCluster(t, cfg)
}

// After a reboot the pid in postmaster.pid may belong to a process named
// postgres that is not this cluster's server (a backend of the system's
// PostgreSQL, say). It must not be signalled, and the start must succeed.
func TestAPostgresProcessThatIsNotOursIsLeftAlone(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	first := startCluster(t, cfg)
	require.NoError(t, first.Stop())
	impostor := startImpostor(t, "")
	writePidFile(t, cfg.DataDir, impostor.Process.Pid)

	startCluster(t, cfg)
	require.True(t, readProcess(impostor.Process.Pid).alive, "a process that is not our server was signalled")
}

// classifyPid acts only on what it can prove.
func TestClassifyPid(t *testing.T) {
	t.Parallel()
	dataDir := testDir(t)
	elsewhere := startImpostor(t, "")
	inDataDir := startImpostor(t, dataDir) // named postgres, in the directory, but no -D
	require.Equal(t, pidOther, classifyPid(os.Getpid(), dataDir), "not named postgres")
	require.Equal(t, pidOther, classifyPid(elsewhere.Process.Pid, dataDir), "postgres working elsewhere")
	require.Equal(t, pidUnknown, classifyPid(inDataDir.Process.Pid, dataDir), "postgres in the directory, not started on it")
	require.Equal(t, pidGone, classifyPid(1<<30, dataDir))
}

// startImpostor runs sleep under the name postgres, in dir if given. A
// symlink, not a copy: writing an executable while parallel tests fork lets a
// child inherit the write descriptor, and exec then fails with "text file
// busy". The kernel names the process after the path it was started by.
func startImpostor(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	bin := filepath.Join(testDir(t), "postgres")
	require.NoError(t, os.Symlink("/bin/sleep", bin))
	cmd := exec.Command(bin, "300")
	cmd.Dir = dir
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // it may be gone if the test failed
		_ = cmd.Wait()
	})
	return cmd
}

func writePidFile(t *testing.T, dataDir string, pid int) {
	t.Helper()
	stale := []byte(itoa(pid) + "\n" + dataDir + "\n")
	require.NoError(t, os.WriteFile(filepath.Join(dataDir, "postmaster.pid"), stale, 0o600))
}

func TestWaitForHonoursCancellation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done, err := waitFor(ctx, time.Hour, func() bool { return false })
	require.False(t, done)
	require.ErrorIs(t, err, context.Canceled)
}

func TestReadProcess(t *testing.T) {
	t.Parallel()
	self := readProcess(os.Getpid())
	require.True(t, self.alive)
	require.NotEqual(t, "postgres", self.comm)
	require.Equal(t, os.Getppid(), self.ppid)
	require.False(t, readProcess(1<<30).alive)
}
