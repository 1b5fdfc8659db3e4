package pgembed

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// testDir returns a fresh directory that the postgres account can traverse
// when the tests run as root (t.TempDir's directories are private to us).
func testDir(t *testing.T) string {
	t.Helper()
	dir, err := MkdirTemp("pgembed-test-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func testConfig(t *testing.T) Config {
	return Config{
		DataDir:   filepath.Join(testDir(t), "pg"),
		Throwaway: true,
		Settings:  map[string]string{"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"},
	}
}

func startCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	c, err := Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

func exec1(t *testing.T, c *Cluster, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.DSN())
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	require.NoError(t, err)
}

func TestStartStopRestartKeepsData(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	c := startCluster(t, cfg)
	exec1(t, c, "CREATE TABLE kept (id int); INSERT INTO kept VALUES (42)")
	pid := c.cmd.Process.Pid
	require.NoError(t, c.Stop())
	require.False(t, readProcess(pid).alive, "postgres still running after Stop")
	_, err := os.Stat(filepath.Join(cfg.DataDir, "postmaster.pid"))
	require.ErrorIs(t, err, os.ErrNotExist, "clean shutdown removes postmaster.pid")
	require.NoError(t, c.Stop(), "Stop is idempotent")

	again := startCluster(t, cfg)
	var got int
	conn, err := pgx.Connect(context.Background(), again.DSN())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT id FROM kept").Scan(&got))
	require.Equal(t, 42, got)
}

func TestTCPNeedsThePassword(t *testing.T) {
	t.Parallel()
	c := startCluster(t, testConfig(t))
	ctx := context.Background()
	good := "postgres://" + Superuser + ":" + c.Password() + "@127.0.0.1:" + itoa(c.Port()) + "/" + Database + "?sslmode=disable"
	conn, err := pgx.Connect(ctx, good)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	_, err = pgx.Connect(ctx, "postgres://"+Superuser+":wrong@127.0.0.1:"+itoa(c.Port())+"/"+Database+"?sslmode=disable")
	require.ErrorContains(t, err, "password authentication failed")
}

func TestSecondClusterOnSameDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	startCluster(t, cfg)
	_, err := Start(context.Background(), cfg)
	require.ErrorContains(t, err, "in use by another Switchyard process")
}

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
	case <-orphan.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the orphaned server was not stopped")
	}
	require.NotEqual(t, orphanPID, c.cmd.Process.Pid)
	exec1(t, c, "INSERT INTO survived VALUES (1)")
}

func TestStalePidFileOfAnotherProgramIsReplaced(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	first := startCluster(t, cfg)
	require.NoError(t, first.Stop())
	// Our own pid is alive and is not postgres: exactly the pid-reuse case.
	stale := []byte(itoa(os.Getpid()) + "\n" + cfg.DataDir + "\n")
	require.NoError(t, os.WriteFile(filepath.Join(cfg.DataDir, "postmaster.pid"), stale, 0o600))
	startCluster(t, cfg)
}

func TestRefusesADirectoryThatIsNotACluster(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(testDir(t), "data")
	require.NoError(t, os.Mkdir(dir, 0o755))
	precious := filepath.Join(dir, "precious.txt")
	require.NoError(t, os.WriteFile(precious, []byte("keep me"), 0o644))
	_, err := Start(context.Background(), Config{DataDir: dir})
	require.ErrorContains(t, err, "is not a PostgreSQL cluster")
	content, err := os.ReadFile(precious)
	require.NoError(t, err, "nothing may be deleted")
	require.Equal(t, "keep me", string(content))
}

func TestRefusesAClusterWithTheWrongOwner(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a directory owned by another account")
	}
	dir := filepath.Join(testDir(t), "data")
	require.NoError(t, os.Mkdir(dir, 0o700)) // owned by root, not postgres
	require.NoError(t, os.WriteFile(filepath.Join(dir, "PG_VERSION"), []byte("15\n"), 0o600))
	_, err := Start(context.Background(), Config{DataDir: dir})
	require.ErrorContains(t, err, "is owned by uid 0")
	_, err = os.Stat(filepath.Join(dir, "PG_VERSION"))
	require.NoError(t, err, "nothing may be deleted")
}

func TestFindBinDirPrefersNewestVersion(t *testing.T) {
	// Not parallel: it empties PATH so pg_config cannot answer first.
	t.Setenv("PATH", t.TempDir())
	root := t.TempDir()
	for _, v := range []string{"9.6", "16", "13"} {
		fakeServer(t, filepath.Join(root, v, "bin"))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "17", "bin"), 0o755)) // no server in it
	got, err := FindBinDir(root)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "16", "bin"), got)

	_, err = FindBinDir(t.TempDir(), filepath.Join(root, "missing"))
	require.True(t, errors.Is(err, ErrNoBinaries))
	require.Contains(t, err.Error(), "apt-get install postgresql")
}

func TestMissingBinariesStopStartWithInstallHint(t *testing.T) {
	_, err := Start(context.Background(), Config{DataDir: filepath.Join(t.TempDir(), "pg"), BinDir: t.TempDir()})
	require.ErrorContains(t, err, "does not contain the postgres and initdb programs")
}

func TestReadProcess(t *testing.T) {
	t.Parallel()
	self := readProcess(os.Getpid())
	require.True(t, self.alive)
	require.NotEqual(t, "postgres", self.comm)
	require.False(t, readProcess(1<<30).alive)
	require.NoError(t, syscall.Kill(os.Getpid(), 0))
}

func fakeServer(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, name := range []string{"postgres", "initdb"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755))
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
