package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/migrate"
	"github.com/switchyard/switchyard/internal/postgres"
)

// sqlstateInsufficientPrivilege is what CREATE DATABASE answers a role
// without CREATEDB.
const sqlstateInsufficientPrivilege = "42501"

// benchCleanupTimeout bounds removing the bench's data, which also runs
// after a cancel.
const benchCleanupTimeout = time.Minute

// benchTarget is the database one bench runs in: normally a fresh one it
// created on the server and drops at the end, so that no earlier history
// weighs on the tables. When the role may not create databases, it is the
// configured database itself, used only if its outbox is empty, and the
// bench's rows are deleted at the end.
type benchTarget struct {
	admin   *pgxpool.Pool   // the configured database; the caller closes it
	config  *pgxpool.Config // connects to the bench database
	pool    *pgxpool.Pool   // the bench database: seeding, enqueuing, checks
	name    string          // the bench database's name
	created bool            // false: in place, in the configured database
	suffix  string          // random; names this run's database, destination and dispatcher
	// With --retained-template: the template the database was copied
	// from (its history's destination is named by the template's suffix,
	// which the run then uses) and how long the copy took.
	template historyTemplate
	copied   time.Duration
}

// newBenchSuffix returns a random suffix for a bench's names.
func newBenchSuffix() string { return strings.ToLower(rand.Text()[:12]) }

// openBenchTarget creates, connects to and migrates the bench's database;
// with --retained-template, it is a copy of that template, made first
// where it does not exist yet (openHistoryTemplate).
func openBenchTarget(ctx context.Context, db *postgres.DB, opts benchOptions, logger *slog.Logger) (*benchTarget, error) {
	t := &benchTarget{admin: db.Pool, config: db.Pool.Config(), suffix: newBenchSuffix()}
	t.config.ConnConfig.RuntimeParams["application_name"] = benchApplication
	t.config.MaxConns = int32(opts.enqueuers + 4)
	name := "switchyard_bench_" + t.suffix
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if opts.retainedTemplate != "" {
		var err error
		if t.template, err = openHistoryTemplate(ctx, t.admin, t.config, opts, logger); err != nil {
			return nil, err
		}
		t.suffix = t.template.suffix
		if create, err = copyOf(ctx, t.admin, name, t.template.name); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	_, err := db.Pool.Exec(ctx, create)
	t.copied = time.Since(start)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		t.name, t.created = name, true
		t.config.ConnConfig.Database = name
		logger.Info("created the bench database; it is dropped at the end", slog.String("database", name),
			slog.String("template", t.template.name))
	case errors.As(err, &pgErr) && pgErr.Code == sqlstateInsufficientPrivilege:
		t.name = t.config.ConnConfig.Database
		logger.Warn("the role may not create databases: the bench runs in the configured database, which must hold no outbox messages",
			slog.String("database", t.name))
	default:
		return nil, fmt.Errorf("create the bench database: %w", err)
	}
	if err := t.prepare(ctx, logger); err != nil {
		t.close(ctx, logger)
		return nil, err
	}
	return t, nil
}

// prepare connects to and migrates the bench database; in place, it
// refuses an outbox that already holds messages: they would be delivered
// by the bench, and timed with it.
func (t *benchTarget) prepare(ctx context.Context, logger *slog.Logger) error {
	pool, err := pgxpool.NewWithConfig(ctx, t.config)
	if err != nil {
		return fmt.Errorf("connect to the bench database: %w", err)
	}
	t.pool = pool
	m, err := migrate.New(pool, logger.With(slog.String("component", "migrate")))
	if err != nil {
		return err
	}
	defer m.Close()
	if _, err := m.Up(ctx); err != nil {
		return fmt.Errorf("migrate the bench database: %w", err)
	}
	if t.created {
		return nil
	}
	var busy bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM switchyard.outbox)`).Scan(&busy); err != nil {
		return fmt.Errorf("check that the outbox is empty: %w", err)
	}
	if busy {
		return fmt.Errorf("database %q already holds outbox messages, and the role may not create a database for the bench: use a role with CREATEDB, or an empty database", t.name)
	}
	return nil
}

// requireOwnDatabase refuses to run in place what writes rows the
// in-place cleanup (deleteRows) cannot remove: seeded history, dead-letter
// groups and the triage events they make (append-only); why says so.
func (t *benchTarget) requireOwnDatabase(why string) error {
	if t.created {
		return nil
	}
	return fmt.Errorf("the role may not create databases: %s (use a role with CREATEDB)", why)
}

// destinationName and owner name this run's destination and dispatcher.
func (t *benchTarget) destinationName() string { return "bench-" + t.suffix }
func (t *benchTarget) owner() string           { return "bench-" + t.suffix }

// close removes what the bench wrote: it drops the database it created, or
// deletes its rows from the configured one. It runs after a cancel too.
func (t *benchTarget) close(ctx context.Context, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), benchCleanupTimeout)
	defer cancel()
	if !t.created {
		if t.pool != nil {
			if err := t.deleteRows(ctx); err != nil {
				logger.Error("remove the bench's rows", slog.String("destination", t.destinationName()), slog.Any("error", err))
			}
			t.pool.Close()
		}
		return
	}
	if t.pool != nil {
		t.pool.Close()
	}
	// FORCE (PostgreSQL 13+) ends sessions a cancelled run may have left.
	if _, err := t.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{t.name}.Sanitize()+" WITH (FORCE)"); err != nil {
		logger.Error("drop the bench database: drop it by hand", slog.String("database", t.name), slog.Any("error", err))
		return
	}
	logger.Info("dropped the bench database", slog.String("database", t.name))
}

// deleteRows removes, in one transaction, every row the bench wrote in
// place (attempts go with their messages).
func (t *benchTarget) deleteRows(ctx context.Context) error {
	return pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		for _, stmt := range []string{
			`DELETE FROM switchyard.outbox_blocked_aggregates WHERE destination = $1`,
			`DELETE FROM switchyard.outbox WHERE destination = $1`,
			`DELETE FROM switchyard.outbox_aggregates WHERE destination = $1`,
			`DELETE FROM switchyard.delivery_stats WHERE destination = $1`,
			`DELETE FROM switchyard.breaker_events WHERE destination = $1`,
			`DELETE FROM switchyard.destinations WHERE name = $1`,
		} {
			if _, err := tx.Exec(ctx, stmt, t.destinationName()); err != nil {
				return fmt.Errorf("%s: %w", stmt, err)
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM switchyard.dispatchers WHERE owner = $1`, t.owner()); err != nil {
			return fmt.Errorf("delete the bench's dispatcher row: %w", err)
		}
		return nil
	})
}
