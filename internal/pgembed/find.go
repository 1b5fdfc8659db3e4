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
// found. Errors wrapping it tell the operator how to install them.
var ErrNoBinaries = errors.New("pgembed: no PostgreSQL server binaries found")

const installHint = "install them, e.g. `apt-get install postgresql`, or set DATABASE_URL to use an existing server"

// DefaultSearchRoot is the directory whose numbered subdirectories hold
// server installations on Debian and Ubuntu (/usr/lib/postgresql/15/bin).
const DefaultSearchRoot = "/usr/lib/postgresql"

// findBinDir picks the server binaries for cfg: BinDir when set; for an
// existing cluster, the installation of its own major version under
// SearchRoots, so that a newer PostgreSQL installed alongside does not
// strand it; otherwise FindBinDir.
func findBinDir(cfg Config) (string, error) {
	if cfg.BinDir != "" {
		return cfg.BinDir, CheckBinDir(cfg.BinDir)
	}
	if version, err := os.ReadFile(filepath.Join(cfg.DataDir, "PG_VERSION")); err == nil {
		if major := strings.TrimSpace(string(version)); isVersion(major) {
			for _, root := range cfg.SearchRoots {
				if bin := filepath.Join(root, major, "bin"); hasServer(bin) {
					return bin, nil
				}
			}
		}
	}
	return FindBinDir(cfg.PgConfig, cfg.SearchRoots...)
}

// FindBinDir returns the directory that holds the postgres and initdb
// programs. It asks `pgConfig --bindir` first (a path, or a name looked up in
// PATH; "" or "-" skips it), then looks in roots/*/bin, newest major version
// first. A directory counts only if both programs are in it: on Debian,
// pg_config may come with the client libraries and point at a directory
// without a server. The error wraps ErrNoBinaries.
func FindBinDir(pgConfig string, roots ...string) (string, error) {
	looked := make([]string, 0, len(roots)+1)
	if pgConfig != "" && pgConfig != "-" {
		looked = append(looked, pgConfig+" --bindir")
		if dir := pgConfigBinDir(pgConfig); hasServer(dir) {
			return dir, nil
		}
	}
	for _, root := range roots {
		looked = append(looked, filepath.Join(root, "*", "bin"))
		for _, dir := range versionDirsNewestFirst(root) {
			bin := filepath.Join(dir, "bin")
			if hasServer(bin) {
				return bin, nil
			}
		}
	}
	return "", fmt.Errorf("%w (looked in %s); %s", ErrNoBinaries, strings.Join(looked, ", "), installHint)
}

// pgConfigBinDir asks pg_config for its bindir, or returns "".
func pgConfigBinDir(pgConfig string) string {
	path, err := exec.LookPath(pgConfig)
	if err != nil {
		return ""
	}
	out, err := exec.Command(path, "--bindir").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// CheckBinDir reports whether dir holds a server installation, for an
// explicitly configured directory. The error wraps ErrNoBinaries.
func CheckBinDir(dir string) error {
	if !hasServer(dir) {
		return fmt.Errorf("%w: %s does not contain the postgres and initdb programs; %s", ErrNoBinaries, dir, installHint)
	}
	return nil
}

// isVersion reports whether s looks like a major version ("15", "9.6").
func isVersion(s string) bool {
	return s != "" && strings.Trim(s, "0123456789.") == "" && s[0] != '.'
}

func hasServer(dir string) bool {
	return dir != "" && isExecutable(filepath.Join(dir, "postgres")) && isExecutable(filepath.Join(dir, "initdb"))
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
