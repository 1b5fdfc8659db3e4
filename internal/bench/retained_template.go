package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// historyTemplate is a database holding a seeded retained history
// (--retained, --retained-dead), from which a bench's database is copied
// (--retained-template). Seeding ten million messages takes minutes on a
// small machine, six times in a side-by-side run's rounds; a file copy of
// the seeded database takes seconds, and gives every round the same
// history, page for page.
type historyTemplate struct {
	name   string        // the template database; "": none
	suffix string        // names the history's destination (benchTarget.suffix)
	seeded time.Duration // > 0: seeded by this run
}

// historyTemplateComment is what a finished template's COMMENT says: the
// history it holds and its destination's suffix. It is written last, so
// that a template a stopped run left half seeded has none and is refused.
const historyTemplateComment = "switchyard bench history: retained=%d retained-dead=%d aggregates=%d suffix=%s"

// openHistoryTemplate returns opts.retainedTemplate, seeding it first in a
// database of that name where there is none. A template whose COMMENT
// says it holds another history (or none: unfinished) is refused.
func openHistoryTemplate(ctx context.Context, admin *pgxpool.Pool, config *pgxpool.Config, opts benchOptions, logger *slog.Logger) (historyTemplate, error) {
	h := historyTemplate{name: opts.retainedTemplate}
	var comment *string
	err := admin.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, h.name).Scan(&comment)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return seedHistoryTemplate(ctx, admin, config, opts, logger)
	case err != nil:
		return h, fmt.Errorf("look up the history template %q: %w", h.name, err)
	case comment == nil:
		return h, fmt.Errorf("database %q holds no finished bench history (a run seeding it stopped, or it is another database): drop it, or name another --retained-template", h.name)
	}
	var retained, dead, aggregates int
	if _, err := fmt.Sscanf(*comment, historyTemplateComment, &retained, &dead, &aggregates, &h.suffix); err != nil {
		return h, fmt.Errorf("database %q is not a bench history template (its comment: %q): name another --retained-template", h.name, *comment)
	}
	if retained != opts.retained || dead != opts.retainedDead || aggregates != opts.aggregates {
		return h, fmt.Errorf("the history template %q holds --retained %d --retained-dead %d --aggregates %d, not this run's %d, %d and %d: drop it, or name another",
			h.name, retained, dead, aggregates, opts.retained, opts.retainedDead, opts.aggregates)
	}
	return h, nil
}

// seedHistoryTemplate creates the template database, seeds the history
// into it (seedRetained) and writes its COMMENT. It leaves no session
// connected to it: a database is copied only while nobody is. On an error
// the template is dropped again.
func seedHistoryTemplate(ctx context.Context, admin *pgxpool.Pool, config *pgxpool.Config, opts benchOptions, logger *slog.Logger) (historyTemplate, error) {
	start := time.Now()
	h := historyTemplate{name: opts.retainedTemplate, suffix: newBenchSuffix()}
	t := &benchTarget{admin: admin, config: config.Copy(), name: h.name, suffix: h.suffix}
	t.config.ConnConfig.Database = h.name
	_, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{h.name}.Sanitize())
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == sqlstateInsufficientPrivilege:
		return h, fmt.Errorf("the role may not create databases: --retained-template needs one (use a role with CREATEDB)")
	case err != nil:
		return h, fmt.Errorf("create the history template %q: %w", h.name, err)
	}
	t.created = true
	logger.Info("seeding the history template; it stays on the server", slog.String("database", h.name))
	if err = t.prepare(ctx, logger); err == nil {
		_, err = seedRetained(ctx, t, opts, logger)
	}
	if t.pool != nil {
		t.pool.Close()
		t.pool = nil
	}
	if err == nil {
		// Our own digits and suffix (lower-case base32): nothing to escape.
		comment := fmt.Sprintf(historyTemplateComment, opts.retained, opts.retainedDead, opts.aggregates, h.suffix)
		_, err = admin.Exec(ctx, "COMMENT ON DATABASE "+pgx.Identifier{h.name}.Sanitize()+" IS '"+comment+"'")
	}
	if err != nil {
		t.close(ctx, logger)
		return h, err
	}
	h.seeded = time.Since(start)
	return h, nil
}

// copyOf returns the statement that creates database name as a copy of
// template, file by file after a checkpoint: STRATEGY FILE_COPY from
// PostgreSQL 15 on, where the default, WAL_LOG, would write every page of
// the history to the WAL; before 15, copying files is the only way.
func copyOf(ctx context.Context, admin *pgxpool.Pool, name, template string) (string, error) {
	var version int
	if err := admin.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return "", fmt.Errorf("read the server's version: %w", err)
	}
	stmt := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	if version >= 150000 {
		stmt += " STRATEGY FILE_COPY"
	}
	return stmt, nil
}
