// Package postgres opens the PostgreSQL database Switchyard runs on: the
// server a URL names, or, without one, the embedded cluster (internal/pgembed)
// started in a data directory. The console's commands, the benchmarks and
// an embedding program open it the same way.
package postgres

import (
	"cmp"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/pgembed"
	"github.com/switchyard/switchyard/internal/queries"
)

// minServerVersion is the oldest PostgreSQL the console supports: xid8 and
// pg_snapshot, which the live feed reads behind, arrived in 13.
const minServerVersion = 130000

// DefaultConnectTimeout bounds each new connection (TCP, startup and
// authentication) unless the URL sets connect_timeout. It is generous on
// purpose: on a loaded machine, after the server restarted and every
// process reconnected at once, new connections timed out at the former
// 5 s in the middle of authenticating (chaos runs at load average 40:
// `failed SASL auth: timeout`), and a
// client that gives up mid-handshake wastes the server's work and starts
// over, which makes the next attempt slower still. A server that is not
// there at all still fails at once (connection refused).
const DefaultConnectTimeout = 15 * time.Second

// pingSlack is what the first query at start may take beyond connecting.
const pingSlack = 5 * time.Second

// Config says which database to open. Without URL, the embedded cluster
// runs in DataDir.
type Config struct {
	URL         string   // PostgreSQL URL (DATABASE_URL); "": the embedded cluster
	DataDir     string   // the embedded cluster's directory is DataDir/pg
	BinDir      string   // postgres and initdb; "": found (pgembed)
	SearchRoots []string // where to look for installations (pgembed)
	// MaxConns sizes the pool unless the URL sets pool_max_conns; 0:
	// pgx's default.
	MaxConns int32
	// ApplicationName is reported to the server; "":
	// DefaultApplicationName.
	ApplicationName string
}

// DefaultApplicationName is the application_name a console's sessions
// report unless Config.ApplicationName says otherwise: how tools (the
// chaos run) tell the console's backends from everyone else's.
const DefaultApplicationName = "switchyard-console"

// DB is an open connection pool and, without a URL, the embedded server
// behind it. Close releases both.
type DB struct {
	Pool    *pgxpool.Pool
	Cluster *pgembed.Cluster // nil when a URL was given
}

// embeddedSettings tune the embedded server for what Switchyard does all
// day: many small transactions committing at once (inbox events, enqueues,
// finalizes), each waiting for its WAL flush. With commit_delay a
// committing backend waits up to 1 ms, when at least two other
// transactions are active, so that one flush covers the commits that
// arrive meanwhile (group commit). In the inbox bench on the shared 2-core
// machine it raised throughput about 10 % at 24 to 32 senders (with 2 ms,
// flushes fell from 9,836 to 1,879 for 20,000 events; BENCHMARKS.md,
// Inbox). Its cost falls on transactions that NOTIFY, which hold the
// notification queue's lock through their flush: at 1,000 enqueues a
// second, each with its NOTIFY, the median enqueue-to-delivery rose from
// 7.6 to 8.8 ms (p99 unchanged, about 21 ms); offered 2,000 a second, the
// dispatcher delivered about 5 % fewer. Durability is unchanged: no
// commit is acknowledged before its flush. It has no effect with fsync
// off. A server of your own (DATABASE_URL) keeps its settings.
var embeddedSettings = map[string]string{
	"commit_delay":    "1000",
	"commit_siblings": "2",
}

// Open connects to cfg.URL, or starts the embedded server in the data
// directory and connects to it. It checks that the server answers and is
// recent enough.
func Open(ctx context.Context, cfg Config, logger *slog.Logger) (*DB, error) {
	db := &DB{}
	dsn := cfg.URL
	if dsn == "" {
		cluster, err := pgembed.Start(ctx, pgembed.Config{
			DataDir:     filepath.Join(cfg.DataDir, "pg"),
			BinDir:      cfg.BinDir,
			SearchRoots: cfg.SearchRoots,
			Settings:    embeddedSettings,
			Logger:      logger.With(slog.String("component", "embedded_postgres")),
		})
		if err != nil {
			return nil, fmt.Errorf("start embedded PostgreSQL: %w", err)
		}
		db.Cluster, dsn = cluster, cluster.DSN()
	}
	if err := db.connect(ctx, dsn, cfg); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// setsJIT reports whether a URL's parameters set jit, as one of their own
// (?jit=on) or in options (-c jit=on).
func setsJIT(params map[string]string) bool {
	_, set := params["jit"]
	return set || strings.Contains(strings.ToLower(params["options"]), "jit=")
}

func (db *DB) connect(ctx context.Context, dsn string, cfg Config) error {
	poolCfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("invalid DATABASE_URL: %w", err)
	}
	if poolCfg.ConnConfig.ConnectTimeout <= 0 {
		poolCfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.MaxConns > 0 && !strings.Contains(dsn, "pool_max_conns") {
		poolCfg.MaxConns = cfg.MaxConns
	}
	poolCfg.ConnConfig.RuntimeParams["application_name"] = cmp.Or(cfg.ApplicationName, DefaultApplicationName)
	// No JIT compilation unless the URL asks for it: every statement the
	// console sends reads a page or moves a batch, over in a few
	// milliseconds, while compiling one costs 15 to 20 ms, and PostgreSQL
	// compiles any statement whose estimated cost passes jit_above_cost,
	// however few rows it then reads. At 10,000,000 rows the dead letters'
	// topic-prefix page took 39 ms, 19 of them compiling; 1.7 ms without.
	// A SET on each new session, not a startup parameter, which poolers
	// such as PgBouncer refuse; like any SET it overrides ALTER ROLE or
	// ALTER DATABASE ... SET jit too.
	if !setsJIT(poolCfg.ConnConfig.RuntimeParams) {
		poolCfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			if _, err := conn.Exec(ctx, "SET jit = off", pgx.QueryExecModeSimpleProtocol); err != nil {
				return fmt.Errorf("turn JIT compilation off: %w", err)
			}
			return nil
		}
	}
	if db.Pool, err = pgxpool.NewWithConfig(ctx, poolCfg); err != nil {
		return fmt.Errorf("open database pool: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, poolCfg.ConnConfig.ConnectTimeout+pingSlack)
	defer cancel()
	version, err := queries.New(db.Pool).ServerVersionNumGet(pingCtx)
	if err != nil {
		return fmt.Errorf("cannot reach the database at %s:%d (database %q): %w",
			poolCfg.ConnConfig.Host, poolCfg.ConnConfig.Port, poolCfg.ConnConfig.Database, flatError{err})
	}
	if version < minServerVersion {
		return fmt.Errorf("PostgreSQL %d is too old: the console needs 13 or newer", version/10000)
	}
	return nil
}

// Unavailable reports whether err says the database could not be reached
// or was not accepting connections (refused, reset, timed out, shutting
// down, starting up, in recovery, out of connection slots): a condition
// that waiting may end. A server that answered with a verdict (a wrong
// password, no such database, an SQL error) or a URL that cannot be parsed
// is not unavailable: waiting would change nothing.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
			"53300": // too_many_connections
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08") // connection_exception
	}
	var parseErr *pgconn.ParseConfigError
	if errors.As(err, &parseErr) {
		return false
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// flatError shows pgx's multi-line connect error (one line per attempt,
// often the same twice: with and without TLS) as one line of distinct
// causes, so the operator sees a single clear line; errors.Is and errors.As
// still see the original.
type flatError struct{ err error }

func (f flatError) Unwrap() error { return f.err }

func (f flatError) Error() string {
	msg := f.err.Error()
	if inner := errors.Unwrap(f.err); inner != nil {
		msg = inner.Error() // drop pgx's "failed to connect to `user=...`" preamble
	}
	var parts []string
	seen := map[string]bool{}
	for _, line := range strings.Split(msg, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !seen[line] {
			seen[line] = true
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, "; ")
}

// Close closes the pool, then stops the embedded server if there is one.
func (db *DB) Close() {
	if db.Pool != nil {
		db.Pool.Close()
	}
	if db.Cluster != nil {
		_ = db.Cluster.Stop()
	}
}
