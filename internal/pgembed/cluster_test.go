package pgembed

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// testDir returns a fresh directory that the postgres account can traverse
// when the tests run as root (t.TempDir's directories are private to us).
func testDir(t *testing.T) string {
	t.Helper()
	dir, err := MkdirTemp("pgembed-test-")
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	return dir
}

// testConfig configures a throwaway cluster in a new directory. Should the
// server account not reach it, it would be relocated inside that directory,
// never into the system's DefaultRelocateRoot.
func testConfig(t *testing.T) Config {
	dir := testDir(t)
	return Config{
		DataDir:      filepath.Join(dir, "pg"),
		RelocateRoot: filepath.Join(dir, "relocated"),
		Throwaway:    true,
		Settings:     map[string]string{"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"},
		Logger:       slog.New(slog.NewTextHandler(testLog{t}, nil)),
	}
}

// testLog writes a cluster's log lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// startCluster starts a cluster that is stopped when the test ends.
func startCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	c, err := Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
	})
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

func queryInt(t *testing.T, c *Cluster, sql string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.DSN())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, sql).Scan(&n))
	return n
}

// ownerUID is the owner of path.
func ownerUID(t *testing.T, path string) uint32 {
	t.Helper()
	info, err := os.Lstat(path)
	require.NoError(t, err)
	return info.Sys().(*syscall.Stat_t).Uid
}

func serverAccount(t *testing.T) serverUser {
	t.Helper()
	owner, err := currentServerUser()
	require.NoError(t, err)
	return owner
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
	select {
	case <-c.Exited():
	default:
		t.Fatal("Exited is not closed after Stop")
	}
	require.NoError(t, c.Err(), "an exit that Stop asked for is not an error")

	again := startCluster(t, cfg)
	require.Equal(t, 42, queryInt(t, again, "SELECT id FROM kept"))
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

func TestReservedSettingsAreRefused(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"listen_addresses", "port", "unix_socket_directories", "unix_socket_permissions", "Port", "listen-addresses"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t)
			cfg.Settings = map[string]string{"work_mem": "8MB", name: "x"}
			_, err := Start(context.Background(), cfg)
			require.ErrorContains(t, err, "setting "+name+" cannot be overridden")
			_, err = os.Stat(cfg.DataDir)
			require.ErrorIs(t, err, os.ErrNotExist, "refused before touching anything")
		})
	}
}

// The socket directory sits beside the data directory, private to the
// server account, and goes away with the server.
func TestSocketDirIsBesideTheDataDirectory(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	c := startCluster(t, cfg)
	require.Equal(t, cfg.DataDir+".sock", c.socketDir)
	info, err := os.Lstat(c.socketDir)
	require.NoError(t, err)
	require.True(t, info.IsDir())
	require.Equal(t, os.FileMode(0o700), info.Mode().Perm())
	require.Equal(t, serverAccount(t).uid, ownerUID(t, c.socketDir))
	require.NoError(t, c.Stop())
	_, err = os.Lstat(c.socketDir)
	require.ErrorIs(t, err, os.ErrNotExist, "Stop removes the socket directory")
}

// A socket directory left with the wrong owner and mode (a chown that
// failed) is ours by name: it is repaired, not refused.
func TestSocketDirWithTheWrongOwnerIsRepaired(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to leave a directory owned by another account than the server's")
	}
	cfg := testConfig(t)
	require.NoError(t, os.Mkdir(cfg.DataDir+".sock", 0o755)) // root's
	c := startCluster(t, cfg)
	require.Equal(t, serverAccount(t).uid, ownerUID(t, c.socketDir))
	info, err := os.Stat(c.socketDir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), info.Mode().Perm())
}

// A data directory whose socket path would be too long gets a random
// temporary socket directory, removed at Stop.
func TestLongDataDirUsesATemporarySocketDir(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.DataDir = filepath.Join(filepath.Dir(cfg.DataDir), strings.Repeat("d", 100))
	c := startCluster(t, cfg)
	require.True(t, strings.HasPrefix(c.socketDir, filepath.Join(os.TempDir(), "switchyard-pg-")), c.socketDir)
	exec1(t, c, "SELECT 1")
	require.NoError(t, c.Stop())
	_, err := os.Lstat(c.socketDir)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// A server that fails to start leaves no socket directory and no lock.
func TestFailedStartCleansUp(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Settings = map[string]string{"shared_buffers": "nonsense"}
	_, err := Start(context.Background(), cfg)
	require.ErrorContains(t, err, "postgres exited while starting")
	_, err = os.Lstat(cfg.DataDir + ".sock")
	require.ErrorIs(t, err, os.ErrNotExist, "the socket directory is removed")
	probe := &Cluster{cfg: cfg}
	require.NoError(t, probe.takeLock(), "the lock is released")
	probe.releaseLock()
}

func itoa(n int) string { return strconv.Itoa(n) }
