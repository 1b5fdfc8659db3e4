package pgembed

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// resolveDataDir returns the directory the server runs in for cfg.DataDir:
// the target of a symlink (a relocated cluster, see relocate), or DataDir
// itself. A DataDir that does not exist yet and that the server account
// cannot reach is relocated now.
func resolveDataDir(cfg Config, owner serverUser) (string, error) {
	info, err := os.Lstat(cfg.DataDir)
	switch {
	case err == nil && info.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(cfg.DataDir)
		if err != nil {
			return "", fmt.Errorf("pgembed: read the data directory link %s: %w", cfg.DataDir, err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(cfg.DataDir), target)
		}
		return filepath.Clean(target), nil
	case err == nil:
		return cfg.DataDir, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("pgembed: inspect data directory %s: %w", cfg.DataDir, err)
	}
	blocked, mode, err := owner.unreachableParent(cfg.DataDir)
	if err != nil {
		return "", err
	}
	if blocked != "" {
		return relocate(cfg, owner, fmt.Sprintf("%s (mode %v) is not searchable by the %s account", blocked, mode, owner.name))
	}
	return cfg.DataDir, nil
}

// relocate prepares a home the server account can reach for the cluster of
// a new DataDir that it cannot reach (why says what stops it):
// <RelocateRoot>/<hash of DataDir>/pg, with DataDir a symlink to it. initdb
// creates the pg directory itself; existing data is never moved or reused.
func relocate(cfg Config, owner serverUser, why string) (string, error) {
	sum := sha256.Sum256([]byte(cfg.DataDir))
	home := filepath.Join(cfg.RelocateRoot, hex.EncodeToString(sum[:8]))
	target := filepath.Join(home, "pg")
	if err := mkdirAll(home, 0o755); err != nil {
		return "", fmt.Errorf("pgembed: create %s for the cluster of %s: %w", home, cfg.DataDir, err)
	}
	if err := owner.checkReachable(target); err != nil {
		return "", fmt.Errorf("pgembed: relocate the cluster of %s, which the postgres account cannot reach: %w", cfg.DataDir, err)
	}
	if entries, err := os.ReadDir(target); err == nil && len(entries) > 0 {
		return "", fmt.Errorf("pgembed: %s does not exist, but %s, where its cluster is relocated, already holds one (was the link removed?); link it back (ln -s %s %s) or remove it; nothing was changed", cfg.DataDir, target, target, cfg.DataDir)
	}
	if err := os.Symlink(target, cfg.DataDir); err != nil {
		return "", fmt.Errorf("pgembed: link %s to its relocated cluster: %w", cfg.DataDir, err)
	}
	cfg.Logger.Info("the postgres account cannot reach the data directory, so the cluster lives elsewhere and the data directory links to it",
		slog.String("data_dir", cfg.DataDir), slog.String("cluster_dir", target), slog.String("reason", why))
	return target, nil
}

// mkdirAll is os.MkdirAll giving each directory it creates exactly mode,
// whatever the umask.
func mkdirAll(dir string, mode os.FileMode) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirAll(parent, mode); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, mode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	}
	return os.Chmod(dir, mode)
}

// prepareDataDir makes cfg.DataDir a usable cluster: it creates one in a
// missing or empty directory and validates an existing one. It never
// deletes or rewrites anything in a directory that already holds files.
func prepareDataDir(cfg Config, owner serverUser) error {
	if err := owner.checkReachable(cfg.DataDir); err != nil {
		return err
	}
	entries, err := os.ReadDir(cfg.DataDir)
	switch {
	case errors.Is(err, fs.ErrNotExist) || (err == nil && len(entries) == 0):
		return initCluster(cfg, owner)
	case err != nil:
		return fmt.Errorf("pgembed: read data directory %s: %w", cfg.DataDir, err)
	default:
		return checkCluster(cfg, owner)
	}
}

// checkCluster validates a non-empty directory: a cluster of our major
// version, owned by the server account, made by us (it has our password).
func checkCluster(cfg Config, owner serverUser) error {
	version, err := os.ReadFile(filepath.Join(cfg.DataDir, "PG_VERSION"))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pgembed: %s is not empty and is not a PostgreSQL cluster (no PG_VERSION); choose another --data directory; nothing was changed", cfg.DataDir)
	}
	if err != nil {
		return fmt.Errorf("pgembed: read PG_VERSION: %w", err)
	}
	if err := owner.checkOwner(cfg.DataDir); err != nil {
		return err
	}
	want, err := serverMajorVersion(cfg.BinDir)
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(string(version)); got != want {
		return fmt.Errorf("pgembed: the cluster in %s is PostgreSQL %s but the server binaries in %s are %s; upgrade it with pg_upgrade or install PostgreSQL %s; nothing was changed", cfg.DataDir, got, cfg.BinDir, want, got)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, passwordFile)); err != nil {
		return fmt.Errorf("pgembed: %s is a PostgreSQL cluster that Switchyard did not create (no %s); run it yourself and set DATABASE_URL; nothing was changed", cfg.DataDir, passwordFile)
	}
	return ensureLogDir(cfg.DataDir, owner)
}

func ensureLogDir(dataDir string, owner serverUser) error {
	dir := filepath.Join(dataDir, logDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("pgembed: create log directory: %w", err)
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("pgembed: inspect log directory: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("pgembed: %s is not a directory; remove it and retry", dir)
	}
	return owner.chown(dir)
}
