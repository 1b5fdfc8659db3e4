// Package pgembed runs a private PostgreSQL server: the console's embedded
// default when no DATABASE_URL is given, and the test harness's cluster. It
// finds the installed server binaries, creates a cluster in a data directory
// that survives restarts, starts it on a private unix socket and a free
// loopback port (as the postgres account when we are root), and stops it.
//
// A Cluster belongs to one process at a time: an flock on DataDir + ".lock",
// beside the data directory (initdb wants an empty directory), proves it.
// That lock is what makes recovery after kill -9 safe: a server still running
// on a directory whose lock nobody holds is an orphan of a dead console, so
// Start stops it and takes over, once /proc shows that the process really is
// the postmaster of this data directory. After a crash of the server itself,
// Start waits for the children of the dead postmaster to exit, and
// PostgreSQL runs crash recovery.
package pgembed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// Superuser is the role initdb creates; the console connects as it.
	Superuser = "switchyard"
	// Database is the database Start creates for the console.
	Database = "switchyard"

	// DefaultRelocateRoot is where Start creates clusters whose DataDir the
	// server account cannot reach (see Config.RelocateRoot).
	DefaultRelocateRoot = "/var/lib/switchyard/clusters"

	passwordFile = "switchyard_password"
	lockSuffix   = ".lock" // the lock file sits beside the data directory
	logDir       = "log"
	logFile      = "postgres.log"
)

// Config says where and how to run the cluster. The zero value of every field
// but DataDir is a sensible default.
type Config struct {
	// DataDir is the cluster directory (PGDATA), or a symlink to it. It is
	// created and initialised when missing or empty; an existing non-empty
	// directory must be a cluster of the same major version, owned by the
	// server account. Start never deletes anything in it. When we are root
	// and the postgres account cannot reach a DataDir that does not exist
	// yet (a clone under /root, say), the cluster is created under
	// RelocateRoot instead and DataDir becomes a symlink to it.
	DataDir string
	// BinDir holds postgres and initdb. Empty: for an existing cluster, the
	// bin directory of its major version under SearchRoots if installed,
	// otherwise FindBinDir(PgConfig, SearchRoots...).
	BinDir string
	// SearchRoots are directories whose numbered subdirectories hold server
	// installations (<root>/15/bin). Default: DefaultSearchRoot.
	SearchRoots []string
	// PgConfig is the pg_config program asked for its --bindir before
	// SearchRoots: a path, or a name looked up in PATH. Default "pg_config";
	// "-" skips it.
	PgConfig string
	// RelocateRoot holds relocated clusters, one per DataDir, in
	// <RelocateRoot>/<first 16 hex digits of sha256(DataDir)>/pg. Default
	// DefaultRelocateRoot.
	RelocateRoot string
	// Settings are extra server settings passed as -c name=value (tests use
	// fsync=off). listen_addresses, port, unix_socket_directories and
	// unix_socket_permissions are ours: Start refuses them.
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

	// pickPort chooses the server's TCP port; tests hand out a busy one.
	// Default freePort.
	pickPort func() (int, error)
	// afterInitdb, when set, runs between initdb and the completion of a
	// new cluster; tests interrupt the creation there.
	afterInitdb func(dir string) error
}

// Cluster is a running server started by Start. Stop it when done.
type Cluster struct {
	cfg       Config // once open has run, DataDir is the real data directory, a symlink resolved
	owner     serverUser
	port      int
	socketDir string
	password  string
	lock      *os.File
	cmd       *exec.Cmd
	exited    chan struct{} // closed when the server process has exited
	stopping  atomic.Bool   // set before Stop signals the server
	// waitErr and ownExit describe the server's exit. They are written
	// before exited is closed and read only after.
	waitErr  error
	ownExit  bool // the server exited without being asked to
	stopOnce sync.Once
	stopErr  error
}

// Start creates the cluster if needed and starts the server, waiting until it
// accepts connections and the console's database exists. Cancelling ctx
// abandons the start, including a wait for an orphaned server to stop.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.BinDir, err = findBinDir(cfg); err != nil {
		return nil, err
	}
	owner, err := currentServerUser()
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, owner: owner, exited: make(chan struct{})}
	if err := c.takeLock(); err != nil {
		return nil, err
	}
	if err := c.open(ctx); err != nil {
		_ = c.Stop() // the start error says what went wrong
		return nil, err
	}
	return c, nil
}

// open makes the data directory a usable cluster and starts the server on it.
func (c *Cluster) open(ctx context.Context) error {
	dataDir, err := resolveDataDir(c.cfg, c.owner)
	if err != nil {
		return err
	}
	c.cfg.DataDir = dataDir
	if err := prepareDataDir(c.cfg, c.owner); err != nil {
		return err
	}
	pw, err := os.ReadFile(filepath.Join(c.cfg.DataDir, passwordFile))
	if err != nil {
		return fmt.Errorf("pgembed: read the superuser password: %w", err)
	}
	c.password = strings.TrimSpace(string(pw))
	if err := stopOrphan(ctx, c.cfg); err != nil {
		return err
	}
	if c.socketDir, err = socketDirFor(c.cfg.DataDir, c.owner); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	if err := c.start(ctx); err != nil {
		return err
	}
	if err := c.ensureDatabase(ctx); err != nil {
		return err
	}
	c.cfg.Logger.Info("embedded postgres ready", slog.String("data_dir", c.cfg.DataDir), slog.Int("port", c.port))
	return nil
}

func withDefaults(cfg Config) (Config, error) {
	if cfg.DataDir == "" {
		return cfg, errors.New("pgembed: no data directory configured")
	}
	if err := checkSettings(cfg.Settings); err != nil {
		return cfg, err
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if len(cfg.SearchRoots) == 0 {
		cfg.SearchRoots = []string{DefaultSearchRoot}
	}
	if cfg.PgConfig == "" {
		cfg.PgConfig = "pg_config"
	}
	if cfg.RelocateRoot == "" {
		cfg.RelocateRoot = DefaultRelocateRoot
	}
	if cfg.pickPort == nil {
		cfg.pickPort = freePort
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return cfg, fmt.Errorf("pgembed: resolve data directory %q: %w", cfg.DataDir, err)
	}
	cfg.DataDir = abs
	return cfg, nil
}

// checkSettings refuses the settings Start chooses itself: overriding them
// would open the server to others or lose its socket. PostgreSQL folds case
// and reads '-' as '_' in setting names, and so does this check.
func checkSettings(settings map[string]string) error {
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		switch strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "-", "_") {
		case "listen_addresses", "port", "unix_socket_directories", "unix_socket_permissions":
			return fmt.Errorf("pgembed: setting %s cannot be overridden: Start chooses it to keep the server private", name)
		}
	}
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

// DataDir is the cluster's data directory: Config.DataDir, or the target of
// its symlink when the cluster was relocated.
func (c *Cluster) DataDir() string { return c.cfg.DataDir }

// BinDir is the directory of the server programs the cluster runs.
func (c *Cluster) BinDir() string { return c.cfg.BinDir }

// LogPath is the server's log file.
func (c *Cluster) LogPath() string { return filepath.Join(c.cfg.DataDir, logDir, logFile) }

func randomPassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("pgembed: generate password: %w", err)
	}
	return hex.EncodeToString(b), nil
}
