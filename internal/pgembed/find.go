package pgembed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrNoBinaries means no PostgreSQL server binaries (postgres and initdb) were
// found. Its message tells the operator how to install them.
var ErrNoBinaries = errors.New("pgembed: no PostgreSQL server binaries found (looked for pg_config --bindir and /usr/lib/postgresql/*/bin); install them, e.g. `apt-get install postgresql`, or set DATABASE_URL to use an existing server")

// DefaultSearchRoot is the directory whose numbered subdirectories hold
// server installations on Debian and Ubuntu (/usr/lib/postgresql/15/bin).
const DefaultSearchRoot = "/usr/lib/postgresql"

// FindBinDir returns the directory that holds the postgres and initdb
// programs. It asks `pg_config --bindir` first (pg_config found through
// PATH), then looks in roots/*/bin, newest major version first. A directory
// counts only if both programs are in it: on Debian, pg_config may come with
// the client libraries and point at a directory without a server.
func FindBinDir(roots ...string) (string, error) {
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		out, err := exec.Command(pgConfig, "--bindir").Output()
		if err == nil {
			dir := strings.TrimSpace(string(out))
			if hasServer(dir) {
				return dir, nil
			}
		}
	}
	for _, root := range roots {
		for _, dir := range versionDirsNewestFirst(root) {
			bin := filepath.Join(dir, "bin")
			if hasServer(bin) {
				return bin, nil
			}
		}
	}
	return "", ErrNoBinaries
}

// CheckBinDir reports whether dir holds a server installation, for an
// explicitly configured directory.
func CheckBinDir(dir string) error {
	if !hasServer(dir) {
		return fmt.Errorf("pgembed: %s does not contain the postgres and initdb programs", dir)
	}
	return nil
}

func hasServer(dir string) bool {
	return isExecutable(filepath.Join(dir, "postgres")) && isExecutable(filepath.Join(dir, "initdb"))
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}

// versionDirsNewestFirst lists root's subdirectories named like a version
// ("15", "16", "9.6"), highest version first.
func versionDirsNewestFirst(root string) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	type versioned struct {
		dir   string
		major float64
	}
	var found []versioned
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		v, err := strconv.ParseFloat(e.Name(), 64)
		if err != nil {
			continue
		}
		found = append(found, versioned{filepath.Join(root, e.Name()), v})
	}
	sort.Slice(found, func(i, j int) bool { return found[i].major > found[j].major })
	dirs := make([]string, len(found))
	for i, f := range found {
		dirs[i] = f.dir
	}
	return dirs
}

// serverMajorVersion runs `postgres --version` and returns its major version
// ("15"), to compare with a cluster's PG_VERSION file.
func serverMajorVersion(binDir string) (string, error) {
	out, err := exec.Command(filepath.Join(binDir, "postgres"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("pgembed: run postgres --version: %w", err)
	}
	// "postgres (PostgreSQL) 15.19 (Debian 15.19-0+deb12u1)"
	fields := strings.Fields(string(out))
	if len(fields) < 3 {
		return "", fmt.Errorf("pgembed: unexpected postgres --version output %q", out)
	}
	return strings.SplitN(fields[2], ".", 2)[0], nil
}
