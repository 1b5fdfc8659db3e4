package pgembed

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pollInterval paces the waits for processes that are not our children:
// /proc is the only way to watch them.
const pollInterval = 20 * time.Millisecond

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
	// A lock just released can still look held for a moment: a process
	// forked (by any goroutine) while the descriptor was open shares it
	// until that child execs and close-on-exec drops it. So a held lock is
	// retried for up to lockWait before the directory counts as in use.
	deadline := time.Now().Add(lockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return fmt.Errorf("pgembed: lock data directory: %w", err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return fmt.Errorf("pgembed: data directory %s is in use by another Switchyard process", c.cfg.DataDir)
		}
		time.Sleep(pollInterval)
	}
	c.lock = f
	return nil
}

// lockWait is how long takeLock retries a held lock.
const lockWait = time.Second

func (c *Cluster) releaseLock() {
	if c.lock != nil {
		_ = c.lock.Close() // closing the descriptor releases the flock
		c.lock = nil
	}
}

// pidOwner is what the process named in postmaster.pid turned out to be.
type pidOwner int

const (
	pidGone    pidOwner = iota // no such process: the file is stale
	pidOurs                    // the postmaster of this data directory
	pidOther                   // verifiably another program: the pid was reused
	pidUnknown                 // cannot be verified either way
)

// stopOrphan deals with the postmaster.pid a previous run left. We hold the
// lock, so whoever started that server is gone: a server that is verifiably
// the postmaster of this data directory is its orphan and is stopped; a file
// whose pid now belongs to another program is removed (PostgreSQL would
// refuse to overwrite it); anything unverifiable is left for PostgreSQL to
// report. After a crash, stopOrphan waits for the dead postmaster's children.
func stopOrphan(ctx context.Context, cfg Config) error {
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
	switch classifyPid(pid, cfg.DataDir) {
	case pidGone:
		return waitLeftovers(ctx, cfg)
	case pidOther:
		cfg.Logger.Warn("removing stale postmaster.pid whose pid is now another program", slog.Int("pid", pid))
		if err := os.Remove(pidPath); err != nil {
			return fmt.Errorf("pgembed: remove stale postmaster.pid: %w", err)
		}
		return nil
	case pidUnknown:
		cfg.Logger.Warn("postmaster.pid names a running postgres process that cannot be verified as this cluster's server; leaving it alone", slog.Int("pid", pid))
		return nil
	}
	return stopServer(ctx, cfg, pid)
}

// classifyPid tells whether pid is the postmaster of dataDir: a process
// named postgres, whose working directory is dataDir (the server chdirs
// there), started with -D dataDir, and whose parent is not a postgres
// process (the server's own children share its directory). A process with
// another name or working elsewhere is another program; one working in
// dataDir that fails the other tests, or whose directory we may not read,
// is unknown.
func classifyPid(pid int, dataDir string) pidOwner {
	p := readProcess(pid)
	switch {
	case !p.alive:
		return pidGone
	case p.comm != "postgres":
		return pidOther
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return pidUnknown // not ours to inspect, or gone meanwhile
	}
	if !sameDir(cwd, dataDir) {
		return pidOther
	}
	if parent := readProcess(p.ppid); parent.alive && parent.comm == "postgres" {
		return pidUnknown
	}
	if !sameDir(dataDirArg(pid), dataDir) {
		return pidUnknown
	}
	return pidOurs
}

// dataDirArg returns the -D argument pid was started with, or "".
func dataDirArg(pid int) string {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	args := strings.Split(string(cmdline), "\x00")
	for i, arg := range args {
		if arg == "-D" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// sameDir reports whether path names dir, symlinks resolved.
func sameDir(path, dir string) bool {
	if path == "" || !filepath.IsAbs(path) {
		return false
	}
	return realPath(path) == realPath(dir)
}

func realPath(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	return filepath.Clean(path)
}

// stopServer stops the orphaned postmaster pid: fast shutdown, then
// immediate shutdown.
func stopServer(ctx context.Context, cfg Config, pid int) error {
	cfg.Logger.Warn("stopping a postgres server left running by a previous console", slog.Int("pid", pid))
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGINT, cfg.StopTimeout}, {syscall.SIGQUIT, 10 * time.Second}} {
		if err := syscall.Kill(pid, step.sig); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		gone, err := waitFor(ctx, step.wait, func() bool { return !readProcess(pid).alive })
		if err != nil {
			return fmt.Errorf("pgembed: wait for the orphaned server (pid %d) to stop: %w", pid, err)
		}
		if gone {
			return nil
		}
	}
	return fmt.Errorf("pgembed: a postgres server (pid %d) left on %s by a previous run does not stop; stop it and retry", pid, cfg.DataDir)
}

// waitLeftovers waits, up to StopTimeout, until no process of a crashed
// server remains: its children outlive a killed postmaster for a moment,
// and PostgreSQL will not start while they hold its shared memory.
func waitLeftovers(ctx context.Context, cfg Config) error {
	left := serverProcesses(cfg.DataDir)
	if len(left) == 0 {
		return nil
	}
	cfg.Logger.Info("waiting for the processes of a crashed server to exit", slog.Any("pids", left))
	gone, err := waitFor(ctx, cfg.StopTimeout, func() bool { return len(serverProcesses(cfg.DataDir)) == 0 })
	if err != nil {
		return fmt.Errorf("pgembed: wait for the processes of a crashed server to exit: %w", err)
	}
	if !gone {
		cfg.Logger.Warn("processes of a crashed server are still running", slog.Any("pids", serverProcesses(cfg.DataDir)))
	}
	return nil
}

// serverProcesses lists the postgres processes working in dataDir that we
// may inspect.
func serverProcesses(dataDir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if p := readProcess(pid); !p.alive || p.comm != "postgres" {
			continue
		}
		if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil && sameDir(cwd, dataDir) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitFor polls done until it holds (true), limit passes (false) or ctx
// ends (its error).
func waitFor(ctx context.Context, limit time.Duration, done func() bool) (bool, error) {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C:
			return done(), nil
		case <-tick.C:
		}
	}
	return true, nil
}

type processInfo struct {
	alive bool
	comm  string
	ppid  int
}

// readProcess reads /proc/PID/stat. A zombie counts as gone: it has released
// the data directory and only waits for its parent to reap it.
func readProcess(pid int) processInfo {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return processInfo{}
	}
	// "1234 (postgres) S 1 ...": comm is between the first '(' and last ')',
	// then come the state and the parent's pid.
	s := string(stat)
	open, closeIdx := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closeIdx < open || closeIdx+2 >= len(s) {
		return processInfo{}
	}
	rest := strings.Fields(s[closeIdx+2:])
	if len(rest) < 2 {
		return processInfo{}
	}
	ppid, _ := strconv.Atoi(rest[1])
	state := rest[0]
	return processInfo{alive: state != "Z" && state != "X", comm: s[open+1 : closeIdx], ppid: ppid}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
