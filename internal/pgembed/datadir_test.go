package pgembed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRefusesADirectoryThatIsNotACluster(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(testDir(t), "data")
	require.NoError(t, os.Mkdir(dir, 0o755))
	precious := filepath.Join(dir, "precious.txt")
	require.NoError(t, os.WriteFile(precious, []byte("keep me"), 0o644))
	_, err := Start(context.Background(), Config{DataDir: dir, RelocateRoot: t.TempDir()})
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
	_, err := Start(context.Background(), Config{DataDir: dir, RelocateRoot: t.TempDir()})
	require.ErrorContains(t, err, "is owned by uid 0")
	_, err = os.Stat(filepath.Join(dir, "PG_VERSION"))
	require.NoError(t, err, "nothing may be deleted")
}

// As root, a new data directory the postgres account cannot reach (a clone
// in /root) gets its cluster elsewhere, linked from the data directory; an
// existing unreachable directory is refused, never moved.
func TestRelocatesAClusterTheServerAccountCannotReach(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another account")
	}
	private := filepath.Join(testDir(t), "private")
	require.NoError(t, os.Mkdir(private, 0o700))
	cfg := testConfig(t)
	cfg.DataDir = filepath.Join(private, "pg")
	cfg.RelocateRoot = filepath.Join(testDir(t), "clusters")

	c := startCluster(t, cfg)
	exec1(t, c, "CREATE TABLE kept (id int); INSERT INTO kept VALUES (5)")
	sum := sha256.Sum256([]byte(cfg.DataDir))
	want := filepath.Join(cfg.RelocateRoot, hex.EncodeToString(sum[:])[:16], "pg")
	target, err := os.Readlink(cfg.DataDir)
	require.NoError(t, err, "the data directory is a link")
	require.Equal(t, want, target)
	require.Equal(t, want, c.DataDir())
	require.Equal(t, serverAccount(t).uid, ownerUID(t, target))
	info, err := os.Stat(filepath.Dir(target))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), info.Mode().Perm())
	require.NoError(t, c.Stop())

	again := startCluster(t, cfg)
	require.Equal(t, 5, queryInt(t, again, "SELECT id FROM kept"))
	require.Equal(t, want, again.DataDir())

	existing := filepath.Join(private, "existing")
	require.NoError(t, os.Mkdir(existing, 0o700))
	_, err = Start(context.Background(), Config{DataDir: existing, RelocateRoot: cfg.RelocateRoot})
	require.ErrorContains(t, err, "the postgres account cannot reach "+existing)
}

// An initdb interrupted before the cluster is complete leaves no data
// directory, so the next start creates the cluster afresh.
func TestInterruptedInitLeavesNoCluster(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	crash := errors.New("crash")
	cfg.afterInitdb = func(dir string) error {
		require.FileExists(t, filepath.Join(dir, "PG_VERSION"))
		return crash
	}
	_, err := Start(context.Background(), cfg)
	require.ErrorIs(t, err, crash)
	_, err = os.Lstat(cfg.DataDir)
	require.ErrorIs(t, err, os.ErrNotExist, "no half-made cluster in the data directory")

	cfg.afterInitdb = nil
	c := startCluster(t, cfg)
	exec1(t, c, "SELECT 1")
}

// What a crash during initdb leaves, DataDir + ".init", is removed and the
// cluster created.
func TestLeftoverInitDirectoryIsReplaced(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	leftover := cfg.DataDir + initSuffix
	require.NoError(t, os.Mkdir(leftover, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(leftover, "PG_VERSION"), []byte("15\n"), 0o600))
	c := startCluster(t, cfg)
	exec1(t, c, "SELECT 1")
	_, err := os.Lstat(leftover)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.FileExists(t, filepath.Join(cfg.DataDir, passwordFile))
}

// initdb's password file must be readable by the server account, whatever
// TMPDIR is.
func TestInitIgnoresAPrivateTMPDIR(t *testing.T) {
	// Not parallel: it changes TMPDIR.
	if os.Geteuid() != 0 {
		t.Skip("only root runs initdb as another account")
	}
	cfg := testConfig(t)
	private := t.TempDir() // 0700, root's
	t.Setenv("TMPDIR", private)
	c := startCluster(t, cfg)
	exec1(t, c, "SELECT 1")
}
