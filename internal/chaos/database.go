package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/pgembed"
)

// database is the run's PostgreSQL: an external server (DATABASE_URL) or
// an embedded cluster the run may restart, always reached by the console
// processes through a proxy that can black-hole (a partition).
type database struct {
	external string // DATABASE_URL; empty: embedded
	embedCfg pgembed.Config
	cluster  *pgembed.Cluster
	proxy    *proxy
	admin    *pgxpool.Pool // direct, for the checker and the faults
}

func openDatabase(ctx context.Context, databaseURL, dataDir string, logger *slog.Logger) (*database, error) {
	db := &database{external: databaseURL}
	if databaseURL == "" {
		db.embedCfg = pgembed.Config{DataDir: dataDir, Logger: logger, Throwaway: true,
			// fsync off: the faults crash PostgreSQL, never the machine, so the
			// OS keeps what was written. synchronous_commit stays on: an
			// acknowledged commit must survive an immediate shutdown.
			Settings: map[string]string{"fsync": "off", "full_page_writes": "off"}}
		c, err := pgembed.Start(ctx, db.embedCfg)
		if err != nil {
			return nil, fmt.Errorf("start the embedded cluster: %w", err)
		}
		db.cluster = c
	}
	direct, err := db.directURL()
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(direct)
	if db.proxy, err = newProxy(u.Host); err != nil {
		return nil, fmt.Errorf("start the PostgreSQL proxy: %w", err)
	}
	if db.admin, err = connect(ctx, direct, adminApp); err != nil {
		return nil, err
	}
	return db, nil
}

// adminApp is the application_name of the checker's own pool, which
// connects straight to the server, never through the proxy; the terminate
// fault spares its backends.
const adminApp = "chaos-checker"

// enqueuerApp is the application_name of the business-traffic pool, which
// goes through the proxy like the console processes.
const enqueuerApp = "chaos-enqueuer"

// connect opens a pool on url whose sessions are called app.
func connect(ctx context.Context, url, app string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse the database URL: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect %s to PostgreSQL: %w", app, err)
	}
	return pool, nil
}

// directURL is the URL of the server itself, over TCP on loopback.
func (db *database) directURL() (string, error) {
	if db.cluster == nil {
		u, err := url.Parse(db.external)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("DATABASE_URL must be a postgres:// URL with a host: %q", db.external)
		}
		return db.external, nil
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword(pgembed.Superuser, db.cluster.Password()),
		Host: "127.0.0.1:" + strconv.Itoa(db.cluster.Port()), Path: "/" + pgembed.Database, RawQuery: "sslmode=disable"}
	return u.String(), nil
}

// processURL is the URL the console processes use: through the proxy.
func (db *database) processURL() string {
	direct, _ := db.directURL()
	u, _ := url.Parse(direct)
	u.Host = db.proxy.Addr()
	return u.String()
}

// restartable reports whether the run may restart PostgreSQL.
func (db *database) restartable() bool { return db.cluster != nil }

// restart stops the embedded server, fast (SIGINT: a checkpoint) or
// immediate (SIGQUIT: crash recovery at the next start), and starts it
// again; the proxy then leads to its new port.
func (db *database) restart(ctx context.Context, immediate bool) error {
	if immediate {
		pid, err := postmasterPID(db.cluster.DataDir())
		if err != nil {
			return err
		}
		if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil {
			return fmt.Errorf("immediate shutdown: %w", err)
		}
		select {
		case <-db.cluster.Exited():
		case <-time.After(30 * time.Second):
			return fmt.Errorf("immediate shutdown: the server did not exit")
		}
	}
	_ = db.cluster.Stop() // after an immediate shutdown: releases the lock
	c, err := pgembed.Start(ctx, db.embedCfg)
	if err != nil {
		return fmt.Errorf("restart the embedded cluster: %w", err)
	}
	db.cluster = c
	direct, _ := db.directURL()
	u, _ := url.Parse(direct)
	db.proxy.setUpstream(u.Host)
	db.proxy.reset()
	admin, err := connect(ctx, direct, adminApp)
	if err != nil {
		return err
	}
	db.admin.Close()
	db.admin = admin
	return nil
}

func postmasterPID(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("read postmaster.pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return 0, fmt.Errorf("parse postmaster.pid: %w", err)
	}
	return pid, nil
}

// close stops what openDatabase started.
func (db *database) close() {
	db.admin.Close()
	db.proxy.Close()
	if db.cluster != nil {
		_ = db.cluster.Stop()
	}
}
