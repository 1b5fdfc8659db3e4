// Package demodb is the demo's own database schema, switchyard_demo, and
// its queries: schema.sql, which Install runs, and the code sqlc generates
// from it and sql/ (every other file of the package). Only `console demo`
// and the inbox bench install it; the core migrations never create it.
package demodb

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/advisory"
)

// Schema is the name of the demo's PostgreSQL schema.
const Schema = "switchyard_demo"

//go:embed schema.sql
var schemaSQL string

// installTimeout bounds the wait for another instance's Install.
const installTimeout = 30 * time.Second

// Install creates the demo's schema, tables and functions where they are
// missing, in one transaction; it is idempotent. Instances that install
// at once are serialised by an advisory lock (concurrent CREATE ... IF NOT
// EXISTS can still collide on the catalog).
func Install(ctx context.Context, pool *pgxpool.Pool) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := advisory.Lock(ctx, tx, advisory.Key("schema", Schema), installTimeout); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schemaSQL)
		return err
	})
	if err != nil {
		return fmt.Errorf("install the demo schema %s: %w", Schema, err)
	}
	return nil
}

// Installed reports whether the demo's schema exists.
func Installed(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	ok, err := New(pool).SchemaInstalled(ctx)
	if err != nil {
		return false, fmt.Errorf("look for the demo schema %s: %w", Schema, err)
	}
	return ok, nil
}

// Uninstall drops the demo's schema and everything in it (what a bench
// installed in someone's database). Administrative DDL, like Install's.
func Uninstall(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{Schema}.Sanitize()+` CASCADE`); err != nil {
		return fmt.Errorf("drop the demo schema %s: %w", Schema, err)
	}
	return nil
}
