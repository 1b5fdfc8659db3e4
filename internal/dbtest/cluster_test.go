package dbtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/pgembed"
)

// privateTMPDIR points TMPDIR at a new directory the postgres account can
// reach, so that the test neither sweeps nor litters the real one.
func privateTMPDIR(t *testing.T) string {
	t.Helper()
	dir, err := pgembed.MkdirTemp("dbtest-test-")
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	t.Setenv("TMPDIR", dir)
	return dir
}

// A failed run keeps its cluster and prints a command that really starts it
// again, on the port the URLs in the test log name. StartCluster also sweeps
// what a killed run left.
func TestKeptClusterRestartsWithThePrintedCommand(t *testing.T) {
	tmp := privateTMPDIR(t)
	stale := filepath.Join(tmp, dirPattern+"killed")
	require.NoError(t, os.Mkdir(stale, 0o755))
	old := time.Now().Add(-2 * staleAfter)
	require.NoError(t, os.Chtimes(stale, old, old))

	c, err := StartCluster(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { // for a test that failed before c.Stop
		if err := c.cluster.Stop(); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
	})
	require.NoDirExists(t, stale, "StartCluster sweeps the leftovers of killed runs")
	execSQL(t, c.URL, "CREATE TABLE kept (id int); INSERT INTO kept VALUES (3)")
	var out bytes.Buffer
	c.out = &out
	c.KeepIf(true)
	c.Stop()

	root := os.Geteuid() == 0
	command := c.restartCommand(root)
	msg := out.String()
	t.Log(msg)
	require.Contains(t, msg, shellJoin(command))
	require.Contains(t, msg, filepath.Join(c.cluster.BinDir(), "postgres")+" -D ")
	require.Contains(t, msg, "-p "+strconv.Itoa(c.cluster.Port()))
	if root {
		require.Contains(t, msg, "runuser -u postgres -- ")
	}
	require.FileExists(t, filepath.Join(c.dir, keptMarker))

	server := exec.Command(command[0], command[1:]...)
	server.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, server.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-server.Process.Pid, syscall.SIGINT) // fast shutdown
		_ = server.Wait()
	})
	require.Equal(t, 3, queryWhenUp(t, c.URL, "SELECT id FROM kept"))
}

func execSQL(t *testing.T, url, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	require.NoError(t, err)
}

// queryWhenUp polls until the server answers (it gives no other signal),
// then runs a query returning one integer.
func queryWhenUp(t *testing.T, url, sql string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			defer conn.Close(context.Background())
			var n int
			require.NoError(t, conn.QueryRow(ctx, sql).Scan(&n))
			return n
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the kept cluster did not come up: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// The sweep removes only directories that are old, unlocked, not kept on
// purpose and without a running server.
func TestSweepRemovesOnlyStaleUnusedDirectories(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	mk := func(name string, files ...string) string {
		dir := filepath.Join(tmp, name)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "pg"), 0o755))
		for _, f := range files {
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o600))
		}
		return dir
	}
	unlocked := mk(dirPattern+"unlocked", "pg.lock")
	noLock := mk(dirPattern + "nolock")
	locked := mk(dirPattern+"locked", "pg.lock")
	kept := mk(dirPattern+"kept", "pg.lock", keptMarker)
	running := mk(dirPattern+"running", "pg.lock")
	other := mk("other-unlocked", "pg.lock")
	fresh := mk(dirPattern+"fresh", "pg.lock")

	holder, err := os.Open(filepath.Join(locked, "pg.lock"))
	require.NoError(t, err)
	defer holder.Close()
	require.NoError(t, syscall.Flock(int(holder.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
	server := startFakeServer(t, tmp)
	pidFile := []byte(strconv.Itoa(server.Process.Pid) + "\n")
	require.NoError(t, os.WriteFile(filepath.Join(running, "pg", "postmaster.pid"), pidFile, 0o600))

	old := time.Now().Add(-2 * staleAfter)
	for _, dir := range []string{unlocked, noLock, locked, kept, running, other} {
		require.NoError(t, os.Chtimes(dir, old, old))
	}
	var out bytes.Buffer
	sweepStale(tmp, time.Now(), &out)
	require.Empty(t, out.String())
	require.NoDirExists(t, unlocked)
	require.NoDirExists(t, noLock)
	for _, dir := range []string{locked, kept, running, other, fresh} {
		require.DirExists(t, dir)
	}
}

// startFakeServer runs sleep under the name postgres. A symlink, not a copy:
// writing an executable while parallel tests fork lets a child inherit the
// write descriptor, and exec then fails with "text file busy".
func startFakeServer(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	bin := filepath.Join(dir, "postgres")
	require.NoError(t, os.Symlink("/bin/sleep", bin))
	cmd := exec.Command(bin, "300")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// A durable cluster, for benchmarks (withpg -durable), keeps PostgreSQL's
// stock durability and has the embedded server's group commit; the test
// cluster has neither.
func TestDurableClusterKeepsFsyncOn(t *testing.T) {
	privateTMPDIR(t)
	settings := func(start func(context.Context) (*Cluster, error)) []string {
		c, err := start(context.Background())
		require.NoError(t, err)
		defer c.Stop()
		conn, err := pgx.Connect(context.Background(), c.URL)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		got := make([]string, 4)
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT current_setting('fsync'),
			current_setting('synchronous_commit'), current_setting('full_page_writes'), current_setting('commit_delay')`).
			Scan(&got[0], &got[1], &got[2], &got[3]))
		return got
	}
	require.Equal(t, []string{"on", "on", "on", "1000"}, settings(StartDurableCluster))
	require.Equal(t, []string{"off", "off", "off", "0"}, settings(StartCluster))
}
