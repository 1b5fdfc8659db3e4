package dbtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard/switchyard/internal/pgembed"
)

const (
	// dirPattern names the temporary directory of each test cluster.
	dirPattern = "switchyard-testdb-"
	// keptMarker, in a cluster's directory, says it was kept on purpose
	// and holds the instructions Stop printed.
	keptMarker = "KEPT"
	// staleAfter is the age past which an unlocked cluster directory is
	// taken for the leftover of a killed run.
	staleAfter = time.Hour
)

// Cluster is a private throwaway server for one test run.
type Cluster struct {
	URL     string // superuser URL over loopback TCP
	dir     string
	cluster *pgembed.Cluster
	keep    bool
	out     io.Writer // where Stop reports: os.Stderr
}

// StartCluster starts a throwaway cluster (fsync off) in a new temporary
// directory that the postgres account can reach when we are root. It first
// removes what earlier runs killed before their cleanup left in TMPDIR.
func StartCluster(ctx context.Context) (*Cluster, error) {
	return startCluster(ctx, map[string]string{
		"fsync":              "off",
		"synchronous_commit": "off",
		"full_page_writes":   "off",
		"max_connections":    "300",
	})
}

// StartDurableCluster is StartCluster for benchmarks: the server keeps
// PostgreSQL's stock durability (fsync, synchronous_commit and
// full_page_writes on) and has the console's embedded server's group
// commit (commit_delay 1000, commit_siblings 2; internal/postgres).
func StartDurableCluster(ctx context.Context) (*Cluster, error) {
	return startCluster(ctx, map[string]string{
		"commit_delay":    "1000",
		"commit_siblings": "2",
		"max_connections": "300",
	})
}

func startCluster(ctx context.Context, settings map[string]string) (*Cluster, error) {
	sweepStale(os.TempDir(), time.Now(), os.Stderr)
	dir, err := pgembed.MkdirTemp(dirPattern)
	if err != nil {
		return nil, err
	}
	c, err := pgembed.Start(ctx, pgembed.Config{
		DataDir:     filepath.Join(dir, "pg"),
		Throwaway:   true,
		Settings:    settings,
		StopTimeout: 10 * time.Second,
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	url := fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/postgres?sslmode=disable", pgembed.Superuser, c.Password(), c.Port())
	return &Cluster{URL: url, dir: dir, cluster: c, out: os.Stderr}, nil
}

// KeepIf keeps the cluster's files after Stop when failed is true, so the
// databases of failing tests can be inspected.
func (c *Cluster) KeepIf(failed bool) { c.keep = failed }

// Stop stops the server and removes its files unless KeepIf(true) was
// called; then it prints how to start the kept cluster again.
func (c *Cluster) Stop() {
	if err := c.cluster.Stop(); err != nil {
		fmt.Fprintln(c.out, "dbtest: stop the test cluster:", err)
	}
	if !c.keep {
		if err := os.RemoveAll(c.dir); err != nil {
			fmt.Fprintln(c.out, "dbtest: remove the test cluster:", err)
		}
		return
	}
	msg := c.keepMessage()
	if err := os.WriteFile(filepath.Join(c.dir, keptMarker), []byte(msg), 0o644); err != nil {
		fmt.Fprintln(c.out, "dbtest: mark the test cluster kept:", err)
	}
	fmt.Fprint(c.out, msg)
}

func (c *Cluster) keepMessage() string {
	return fmt.Sprintf("dbtest: tests failed; their databases are kept in %s. Start the server again with\n\t%s\n"+
		"and connect with the URLs in the test log (port %d). Remove %s when done.\n",
		c.cluster.DataDir(), shellJoin(c.restartCommand(os.Geteuid() == 0)), c.cluster.Port(), c.dir)
}

// restartCommand starts the kept cluster on the port it had, so that the
// URLs in the test log work again; without a unix socket, whose directory
// is gone. As root, it runs the server as the postgres account.
func (c *Cluster) restartCommand(root bool) []string {
	args := []string{
		filepath.Join(c.cluster.BinDir(), "postgres"),
		"-D", c.cluster.DataDir(),
		"-p", strconv.Itoa(c.cluster.Port()),
		"-k", "",
		"-c", "listen_addresses=127.0.0.1",
	}
	if root {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	return args
}

// shellJoin quotes args for a POSIX shell.
func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, arg := range args {
		if arg != "" && strings.Trim(arg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:") == "" {
			quoted[i] = arg
		} else {
			quoted[i] = "'" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
		}
	}
	return strings.Join(quoted, " ")
}

// sweepStale removes the cluster directories in tmpDir that runs killed
// before their cleanup (by go test -timeout, say) left behind. It removes a
// directory only if it is older than staleAfter, was not kept on purpose,
// nobody holds its lock and no server runs in it: never one in use.
func sweepStale(tmpDir string, now time.Time, out io.Writer) {
	dirs, err := filepath.Glob(filepath.Join(tmpDir, dirPattern+"*"))
	if err != nil {
		return // only a malformed pattern fails
	}
	for _, dir := range dirs {
		if err := sweepOne(dir, now); err != nil {
			fmt.Fprintf(out, "dbtest: remove the stale test cluster %s: %v\n", dir, err)
		}
	}
}

func sweepOne(dir string, now time.Time) error {
	info, err := os.Lstat(dir)
	if err != nil || !info.IsDir() || now.Sub(info.ModTime()) < staleAfter {
		return nil
	}
	if _, err := os.Lstat(filepath.Join(dir, keptMarker)); err == nil {
		return nil
	}
	unlock, free := tryLock(filepath.Join(dir, "pg.lock"))
	if !free {
		return nil
	}
	defer unlock()
	if serverRunning(filepath.Join(dir, "pg")) {
		return nil
	}
	return os.RemoveAll(dir)
}

// tryLock takes the lock pgembed holds on a data directory while it runs,
// without waiting. A missing lock file is free; one we cannot open is not.
func tryLock(path string) (unlock func(), free bool) {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return func() {}, true
	}
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}

// serverRunning reports whether the pid in dataDir's postmaster.pid is a
// live postgres process.
func serverRunning(dataDir string) bool {
	content, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(content), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	return open >= 0 && end > open && s[open+1:end] == "postgres" && !strings.HasPrefix(s[end+1:], " Z")
}
