// Package migrate applies Switchyard's embedded goose migrations. Goose keeps
// its version table inside the switchyard schema, so a service's own goose
// table (public.goose_db_version) never collides with ours.
package migrate

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/switchyard/switchyard/migrations"
)

const (
	// versionTable is goose's bookkeeping table.
	versionTable = "switchyard.goose_db_version"
	// The lock serialises migrations across console instances starting at
	// once. Goose's own session locker cannot cover the CREATE SCHEMA that
	// has to come first. The two-int4 form keeps it apart from the
	// application's own bigint advisory locks in the same database.
	lockSQL   = "SELECT pg_advisory_lock(hashtext('switchyard'), hashtext('migrate'))"
	tryLock   = "SELECT pg_try_advisory_lock(hashtext('switchyard'), hashtext('migrate'))"
	unlockSQL = "SELECT pg_advisory_unlock(hashtext('switchyard'), hashtext('migrate'))"
	schemaSQL = "CREATE SCHEMA IF NOT EXISTS switchyard"
)

// Migrator runs goose over one database.
type Migrator struct {
	db       *sql.DB
	provider *goose.Provider
	logger   *slog.Logger
}

// New returns a Migrator for pool. Close it when done: it holds a
// database/sql handle over the pool (closing it leaves the pool open).
// Migrating uses two of the pool's connections at once: one holds the lock.
func New(pool *pgxpool.Pool, logger *slog.Logger) (*Migrator, error) {
	db := stdlib.OpenDBFromPool(pool)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithTableName(versionTable),
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(logger),
	)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate: load migrations: %w", err)
	}
	return &Migrator{db: db, provider: provider, logger: logger}, nil
}

// Close releases the database/sql handle.
func (m *Migrator) Close() error { return m.db.Close() }

// Up applies every pending migration and returns how many it applied. A
// database migrated before the baseline is adopted first (baseline.go).
func (m *Migrator) Up(ctx context.Context) (int, error) {
	var applied int
	err := m.locked(ctx, func(conn *sql.Conn) error {
		if err := m.adoptPreBaseline(ctx, conn); err != nil {
			return err
		}
		results, err := m.provider.Up(ctx)
		applied = len(results)
		return err
	})
	if err != nil {
		return applied, fmt.Errorf("migrate: up: %w", err)
	}
	return applied, nil
}

// Down rolls back the most recent migration, after adopting a database
// migrated before the baseline as Up does.
func (m *Migrator) Down(ctx context.Context) error {
	err := m.locked(ctx, func(conn *sql.Conn) error {
		if err := m.adoptPreBaseline(ctx, conn); err != nil {
			return err
		}
		_, err := m.provider.Down(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: down: %w", err)
	}
	return nil
}

// Status lists every known migration and whether it is applied.
func (m *Migrator) Status(ctx context.Context) ([]*goose.MigrationStatus, error) {
	var status []*goose.MigrationStatus
	err := m.locked(ctx, func(*sql.Conn) (err error) {
		status, err = m.provider.Status(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("migrate: status: %w", err)
	}
	return status, nil
}

// Current reports whether the database has every migration this binary
// knows, for /readyz: a missing lower version counts as pending too. It
// takes no lock.
func (m *Migrator) Current(ctx context.Context) (bool, error) {
	pending, err := m.provider.HasPending(ctx)
	if err != nil {
		return false, fmt.Errorf("migrate: check pending: %w", err)
	}
	return !pending, nil
}

// locked runs fn while holding the migration advisory lock on a dedicated
// connection, which it hands to fn, after making sure the schema that holds
// goose's table exists.
func (m *Migrator) locked(ctx context.Context, fn func(conn *sql.Conn) error) (err error) {
	conn, err := m.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	if err := m.lock(ctx, conn); err != nil {
		return err
	}
	defer func() {
		if _, uerr := conn.ExecContext(context.WithoutCancel(ctx), unlockSQL); uerr != nil {
			// A connection still holding the lock must not go back to
			// the pool: discard it, which ends its session and the lock.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			if err == nil {
				err = fmt.Errorf("release migration lock: %w", uerr)
			}
		}
	}()
	if _, err := conn.ExecContext(ctx, schemaSQL); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	return fn(conn)
}

// lock takes the migration lock, saying so in the log when another instance
// holds it, and gives up when ctx ends.
func (m *Migrator) lock(ctx context.Context, conn *sql.Conn) error {
	var got bool
	if err := conn.QueryRowContext(ctx, tryLock).Scan(&got); err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	if got {
		return nil
	}
	m.logger.Info("waiting for another instance to finish migrating")
	if _, err := conn.ExecContext(ctx, lockSQL); err != nil {
		return fmt.Errorf("wait for migration lock: %w", err)
	}
	return nil
}
