package pgembed

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// maxSocketPath is the longest unix socket path we use: the kernel's limit
// is 107 bytes, and some tools' is lower.
const maxSocketPath = 100

// socketDirFor returns the private directory for the server's unix socket:
// <data directory>.sock beside the data directory, in a directory we write
// to (the lock file is there) rather than the shared /tmp, so that another
// local user cannot claim or block the name. A start after kill -9 reuses it. When a socket path in it would be too long, a new
// temporary directory with a random name is used instead. The caller removes
// the directory when the server stops or fails to start.
func socketDirFor(dataDir string, owner serverUser) (string, error) {
	dir := dataDir + ".sock"
	if len(dir)+len("/.s.PGSQL.65535") > maxSocketPath {
		return tempSocketDir(owner)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("pgembed: create socket directory: %w", err)
	}
	if err := claimSocketDir(dir, owner); err != nil {
		return "", err
	}
	return dir, nil
}

// claimSocketDir makes dir a directory of the server account's, closed to
// everyone else. The name is ours, inside our own parent directory, so a
// leftover with the wrong owner or mode (a chown that failed) is repaired,
// through a descriptor so that a symlink in its place is refused.
func claimSocketDir(dir string, owner serverUser) error {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("pgembed: %s is not a usable socket directory (remove it and retry): %w", dir, err)
	}
	defer f.Close()
	if err := owner.fchown(f); err != nil {
		return err
	}
	if err := f.Chmod(0o700); err != nil {
		return fmt.Errorf("pgembed: restrict socket directory %s: %w", dir, err)
	}
	return nil
}

// tempSocketDir creates a socket directory with a random name in TMPDIR.
func tempSocketDir(owner serverUser) (string, error) {
	dir, err := os.MkdirTemp("", "switchyard-pg-")
	if err != nil {
		return "", fmt.Errorf("pgembed: create socket directory: %w", err)
	}
	err = claimSocketDir(dir, owner)
	if err == nil {
		err = owner.checkReachable(filepath.Join(dir, ".s.PGSQL"))
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// MkdirTemp creates a new temporary directory in which a data directory can
// be created: the server account can traverse it even when we are root
// (os.MkdirTemp makes directories only their creator can enter). The caller
// removes it.
func MkdirTemp(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", fmt.Errorf("pgembed: create temporary directory: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("pgembed: open temporary directory to the server account: %w", err)
	}
	return dir, nil
}
