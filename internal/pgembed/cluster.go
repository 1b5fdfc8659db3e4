// Package pgembed runs a private PostgreSQL server: the console's embedded
// default when no DATABASE_URL is given, and the test harness's cluster. It
// finds the installed server binaries, creates a cluster in a data directory
// that survives restarts, starts it on a private unix socket and a free
// loopback port (as the postgres account when we are root), and stops it.
//
// A Cluster belongs to one process at a time: an flock on DataDir + ".lock",
// beside the data directory (initdb wants an empty directory), proves it. That lock is what makes recovery after kill -9 safe: a
// server still running on a directory whose lock nobody holds is an orphan of
// a dead console, so Start stops it and takes over.
package pgembed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// Superuser is the role initdb creates; the console connects as it.
	Superuser = "switchyard"
	// Database is the database Start creates for the console.
	Database = "switchyard"

	passwordFile = "switchyard_password"
	lockSuffix   = ".lock" // the lock file sits beside the data directory
	logDir       = "log"
	logFile      = "postgres.log"
)

// Config says where and how to run the cluster. The zero value of every field
// but DataDir is a sensible default.
type Config struct {
	// DataDir is the cluster directory (PGDATA). It is created and
	// initialised when missing or empty; an existing non-empty directory
	// must be a cluster of the same major version, owned by the server
	// account. Start never deletes anything in it.
	DataDir string
	// BinDir holds postgres and initdb. Empty: FindBinDir.
	BinDir string
	// Settings are extra server settings passed as -c name=value (tests use
	// fsync=off). listen_addresses, port and the socket directory are ours.
	Settings map[string]string
	// Throwaway skips initdb's fsync: for test clusters that may be lost.
	// Pair it with Settings fsync=off.
	Throwaway bool
	// StartTimeout bounds starting, including crash recovery. Default 60 s.
	StartTimeout time.Duration
	// StopTimeout bounds a fast shutdown before it becomes immediate.
	// Default 30 s.
	StopTimeout time.Duration
	// Logger receives lifecycle messages. Default: discard.
	Logger *slog.Logger
}

// Cluster is a running server started by Start. Stop it when done.
type Cluster struct {
	cfg       Config
	port      int
	socketDir string
	password  string
	lock      *os.File
	cmd       *exec.Cmd
	exited    chan struct{} // closed when the server process has exited
	stopOnce  sync.Once
	stopErr   error
}

// Start creates the cluster if needed and starts the server, waiting until it
// accepts connections and the console's database exists.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg = withDefaults(cfg)
	if cfg.BinDir == "" {
		dir, err := FindBinDir(DefaultSearchRoot)
		if err != nil {
			return nil, err
		}
		cfg.BinDir = dir
	} else if err := CheckBinDir(cfg.BinDir); err != nil {
		return nil, err
	}
	owner, err := currentServerUser()
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, exited: make(chan struct{})}
	if err := c.takeLock(); err != nil {
		return nil, err
	}
	if err := prepareDataDir(cfg, owner); err != nil {
		c.releaseLock()
		return nil, err
	}
	if err := c.start(ctx, owner); err != nil {
		c.releaseLock()
		return nil, err
	}
	return c, nil
}

func withDefaults(cfg Config) Config {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err == nil {
		cfg.DataDir = abs
	}
	return cfg
}

func (c *Cluster) start(ctx context.Context, owner serverUser) error {
	pw, err := os.ReadFile(filepath.Join(c.cfg.DataDir, passwordFile))
	if err != nil {
		return fmt.Errorf("pgembed: read the superuser password: %w", err)
	}
	c.password = strings.TrimSpace(string(pw))
	if err := stopOrphan(c.cfg); err != nil {
		return err
	}
	if c.socketDir, err = socketDirFor(c.cfg.DataDir, owner); err != nil {
		return err
	}
	if c.port, err = freePort(); err != nil {
		return err
	}
	if err := c.spawn(owner); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	if err := c.waitReady(ctx); err != nil {
		_ = c.Stop()
		return err
	}
	if err := c.ensureDatabase(ctx); err != nil {
		_ = c.Stop()
		return err
	}
	c.cfg.Logger.Info("embedded postgres ready", slog.String("data_dir", c.cfg.DataDir), slog.Int("port", c.port))
	return nil
}

// spawn starts the postmaster as our child, in its own process group so a
// Ctrl-C in the terminal reaches only us: we stop the server after the
// console has drained. Pdeathsig asks the kernel to send it SIGINT (fast
// shutdown) if we die without stopping it, as under kill -9.
func (c *Cluster) spawn(owner serverUser) error {
	logPath := filepath.Join(c.cfg.DataDir, logDir, logFile)
	logOut, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("pgembed: open server log: %w", err)
	}
	defer logOut.Close()
	args := []string{
		"-D", c.cfg.DataDir,
		"-p", strconv.Itoa(c.port),
		"-k", c.socketDir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_permissions=0700",
	}
	names := make([]string, 0, len(c.cfg.Settings))
	for name := range c.cfg.Settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		args = append(args, "-c", name+"="+c.cfg.Settings[name])
	}
	cmd := exec.Command(filepath.Join(c.cfg.BinDir, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logOut, logOut
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: owner.credential(),
		Setpgid:    true,
		Pdeathsig:  syscall.SIGINT,
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgembed: start postgres: %w", err)
	}
	c.cmd = cmd
	go func() {
		_ = cmd.Wait()
		close(c.exited)
	}()
	return nil
}

// Port is the loopback TCP port the server listens on.
func (c *Cluster) Port() int { return c.port }

// DSN is the connection string for the console's database over the private
// unix socket.
func (c *Cluster) DSN() string {
	return c.SocketDSN(Database)
}

// SocketDSN connects as the superuser to database over the private socket.
func (c *Cluster) SocketDSN(database string) string {
	q := url.Values{"host": {c.socketDir}, "sslmode": {"disable"}}
	return fmt.Sprintf("postgres://%s@:%d/%s?%s", Superuser, c.port, url.PathEscape(database), q.Encode())
}

// Password is the superuser's password, for TCP connections to 127.0.0.1.
func (c *Cluster) Password() string { return c.password }

// LogPath is the server's log file.
func (c *Cluster) LogPath() string { return filepath.Join(c.cfg.DataDir, logDir, logFile) }

// Stop shuts the server down (fast shutdown, then immediate after
// StopTimeout) and releases the data directory. It is idempotent and safe to
// call from several goroutines.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.stopErr = c.stop()
		if c.socketDir != "" {
			_ = os.RemoveAll(c.socketDir)
		}
		c.releaseLock()
	})
	return c.stopErr
}

func (c *Cluster) stop() error {
	if c.cmd == nil {
		return nil
	}
	select {
	case <-c.exited:
		return nil
	default:
	}
	// SIGINT is PostgreSQL's fast shutdown: roll back sessions, checkpoint,
	// exit. SIGQUIT is immediate shutdown: crash recovery at the next start.
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
		return nil
	case <-time.After(c.cfg.StopTimeout):
	}
	_ = c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.exited:
		return fmt.Errorf("pgembed: server needed an immediate shutdown after %v", c.cfg.StopTimeout)
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return errors.New("pgembed: server had to be killed")
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgembed: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomPassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("pgembed: generate password: %w", err)
	}
	return hex.EncodeToString(b), nil
}
