package pgembed

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// prepareDataDir makes cfg.DataDir a usable cluster: it runs initdb on a
// missing or empty directory and validates an existing one. It never deletes
// or rewrites anything in a directory that already holds files.
func prepareDataDir(cfg Config, owner serverUser) error {
	if err := owner.checkReachable(cfg.DataDir); err != nil {
		return err
	}
	entries, err := os.ReadDir(cfg.DataDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(cfg.DataDir, 0o700); err != nil {
			return fmt.Errorf("pgembed: create data directory: %w", err)
		}
		if err := owner.chown(cfg.DataDir); err != nil {
			return err
		}
		return initCluster(cfg, owner)
	case err != nil:
		return fmt.Errorf("pgembed: read data directory %s: %w", cfg.DataDir, err)
	case len(entries) == 0:
		if err := adoptEmptyDir(cfg.DataDir, owner); err != nil {
			return err
		}
		return initCluster(cfg, owner)
	default:
		return checkCluster(cfg, owner)
	}
}

// adoptEmptyDir takes an empty directory made by our own account (a test's
// temporary directory, say) for the server account.
func adoptEmptyDir(dir string, owner serverUser) error {
	if owner.switched {
		if err := owner.chown(dir); err != nil {
			return err
		}
	} else if err := owner.checkOwner(dir); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("pgembed: restrict data directory: %w", err)
	}
	return nil
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

// initCluster runs initdb. Local (socket) connections are trusted because the
// socket directory is private to the server account; TCP on loopback needs the
// generated superuser password, kept in the data directory.
func initCluster(cfg Config, owner serverUser) error {
	password, err := randomPassword()
	if err != nil {
		return err
	}
	pwFile, err := os.CreateTemp("", "switchyard-pw-")
	if err != nil {
		return fmt.Errorf("pgembed: create password file: %w", err)
	}
	defer os.Remove(pwFile.Name())
	_, werr := pwFile.WriteString(password + "\n")
	if cerr := pwFile.Close(); werr != nil || cerr != nil {
		return fmt.Errorf("pgembed: write password file: %w", errors.Join(werr, cerr))
	}
	if err := owner.chown(pwFile.Name()); err != nil {
		return err
	}
	args := []string{
		"-D", cfg.DataDir,
		"-U", Superuser,
		"--pwfile=" + pwFile.Name(),
		"--auth-local=trust",
		"--auth-host=scram-sha-256",
		"-E", "UTF8",
		"--locale=C",
	}
	if cfg.Throwaway {
		args = append(args, "--no-sync")
	}
	cmd := exec.Command(filepath.Join(cfg.BinDir, "initdb"), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: owner.credential()}
	cfg.Logger.Info("creating embedded postgres cluster", "data_dir", cfg.DataDir)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgembed: initdb failed: %w: %s", err, lastLines(out.String(), 5))
	}
	stored := filepath.Join(cfg.DataDir, passwordFile)
	if err := os.WriteFile(stored, []byte(password+"\n"), 0o600); err != nil {
		return fmt.Errorf("pgembed: store password: %w", err)
	}
	if err := owner.chown(stored); err != nil {
		return err
	}
	return ensureLogDir(cfg.DataDir, owner)
}

func ensureLogDir(dataDir string, owner serverUser) error {
	dir := filepath.Join(dataDir, logDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pgembed: create log directory: %w", err)
	}
	return owner.chown(dir)
}

// takeLock claims the data directory for this process. The lock dies with
// the process, so a console killed with kill -9 leaves nothing to clean up.
// The descriptor is close-on-exec: the server must not inherit it, or an
// orphaned server would keep the directory claimed.
func (c *Cluster) takeLock() error {
	if err := os.MkdirAll(filepath.Dir(c.cfg.DataDir), 0o755); err != nil {
		return fmt.Errorf("pgembed: create %s: %w", filepath.Dir(c.cfg.DataDir), err)
	}
	f, err := os.OpenFile(c.cfg.DataDir+lockSuffix, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("pgembed: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("pgembed: data directory %s is in use by another Switchyard process", c.cfg.DataDir)
		}
		return fmt.Errorf("pgembed: lock data directory: %w", err)
	}
	c.lock = f
	return nil
}

func (c *Cluster) releaseLock() {
	if c.lock != nil {
		_ = c.lock.Close() // closing the descriptor releases the flock
		c.lock = nil
	}
}

// stopOrphan stops a server left running on the directory by a process that
// died (we hold the lock, so its owner is gone), and removes a postmaster.pid
// whose pid now belongs to an unrelated process, which PostgreSQL would
// otherwise refuse to overwrite.
func stopOrphan(cfg Config) error {
	pidPath := filepath.Join(cfg.DataDir, "postmaster.pid")
	content, err := os.ReadFile(pidPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pgembed: read postmaster.pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(content), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		return nil // a torn file: PostgreSQL treats it as stale itself
	}
	state := readProcess(pid)
	switch {
	case !state.alive:
		return nil // stale file: PostgreSQL replaces it
	case state.comm != "postgres":
		cfg.Logger.Warn("removing stale postmaster.pid whose pid is now another program", "pid", pid, "program", state.comm)
		if err := os.Remove(pidPath); err != nil {
			return fmt.Errorf("pgembed: remove stale postmaster.pid: %w", err)
		}
		return nil
	}
	cfg.Logger.Warn("stopping a postgres server left running by a previous console", "pid", pid)
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGINT, cfg.StopTimeout}, {syscall.SIGQUIT, 10 * time.Second}} {
		_ = syscall.Kill(pid, step.sig)
		if waitGone(pid, step.wait) {
			return nil
		}
	}
	return fmt.Errorf("pgembed: a postgres server (pid %d) left on %s by a previous run does not stop; stop it and retry", pid, cfg.DataDir)
}

func waitGone(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if !readProcess(pid).alive {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

type processInfo struct {
	alive bool
	comm  string
}

// readProcess reads /proc/PID/stat. A zombie counts as gone: it has released
// the data directory and only waits for its new parent to reap it.
func readProcess(pid int) processInfo {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return processInfo{}
	}
	// "1234 (postgres) S 1 ...": comm is between the first '(' and last ')'.
	s := string(stat)
	open, closeIdx := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closeIdx < open || closeIdx+2 >= len(s) {
		return processInfo{}
	}
	state := s[closeIdx+2]
	return processInfo{alive: state != 'Z' && state != 'X', comm: s[open+1 : closeIdx]}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
