package pgembed

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFindBinDirPrefersNewestVersion(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, v := range []string{"9.6", "16", "13"} {
		fakeServer(t, filepath.Join(root, v, "bin"))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "17", "bin"), 0o755)) // no server in it
	got, err := FindBinDir("-", root)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "16", "bin"), got)

	_, err = FindBinDir("-", t.TempDir(), filepath.Join(root, "missing"))
	require.ErrorIs(t, err, ErrNoBinaries)
	require.Contains(t, err.Error(), "apt-get install postgresql")
}

func TestFindBinDirAsksPgConfigFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "server", "bin")
	fakeServer(t, bin)
	pgConfig := filepath.Join(dir, "pg_config")
	writeScript(t, pgConfig, "echo "+bin)
	root := t.TempDir()
	fakeServer(t, filepath.Join(root, "16", "bin"))

	got, err := FindBinDir(pgConfig, root)
	require.NoError(t, err)
	require.Equal(t, bin, got)
	got, err = FindBinDir("-", root)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "16", "bin"), got, "- skips pg_config")
}

// With no server installed, Start fails with one line saying how to
// install one.
func TestNoBinariesGivesTheInstallHint(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.SearchRoots, cfg.PgConfig = []string{t.TempDir()}, "-"
	_, err := Start(context.Background(), cfg)
	require.ErrorIs(t, err, ErrNoBinaries)
	require.ErrorContains(t, err, "apt-get install postgresql")
	require.NotContains(t, err.Error(), "\n")
}

func TestMissingBinariesStopStartWithInstallHint(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.BinDir = t.TempDir()
	_, err := Start(context.Background(), cfg)
	require.ErrorIs(t, err, ErrNoBinaries)
	require.ErrorContains(t, err, "does not contain the postgres and initdb programs")
	require.ErrorContains(t, err, "apt-get install postgresql")
}

// After a major upgrade installed a newer PostgreSQL alongside, an existing
// cluster keeps the binaries of its own version.
func TestExistingClusterPrefersItsOwnMajorVersion(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, v := range []string{"15", "16"} {
		fakeServer(t, filepath.Join(root, v, "bin"))
	}
	dataDir := filepath.Join(t.TempDir(), "pg")
	cfg := Config{DataDir: dataDir, SearchRoots: []string{t.TempDir(), root}, PgConfig: "-"}

	got, err := findBinDir(cfg)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "16", "bin"), got, "a new cluster takes the newest")

	require.NoError(t, os.Mkdir(dataDir, 0o700))
	for version, want := range map[string]string{"15": "15", "14": "16"} {
		require.NoError(t, os.WriteFile(filepath.Join(dataDir, "PG_VERSION"), []byte(version+"\n"), 0o600))
		got, err := findBinDir(cfg)
		require.NoError(t, err)
		require.Equal(t, filepath.Join(root, want, "bin"), got, "PG_VERSION %s", version)
	}
}

func fakeServer(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, name := range []string{"postgres", "initdb"} {
		writeScript(t, filepath.Join(dir, name), "")
	}
}

// writeScript writes an executable shell script from a child process. Written
// from this process, a parallel test's fork could inherit the descriptor and
// make running the script fail with "text file busy".
func writeScript(t *testing.T, path, body string) {
	t.Helper()
	out, err := exec.Command("sh", "-c", `printf '#!/bin/sh\n%s\n' "$1" >"$2" && chmod 755 "$2"`, "sh", body, path).CombinedOutput()
	require.NoError(t, err, "%s", out)
}
