package migrate_test

import (
	"bytes"
	"context"
	"embed"
	"io/fs"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/migrate"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// preBaseline holds the migrations from before the baseline, embedded so
// that the test binary runs from any directory (make test-unprivileged).
//
//go:embed testdata/pre-baseline/*.sql
var preBaseline embed.FS

func newMigrator(t *testing.T, pool *pgxpool.Pool) *migrate.Migrator {
	t.Helper()
	m, err := migrate.New(pool, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m
}

func TestTemplateIsMigratedAndCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	m := newMigrator(t, pool)
	current, err := m.Current(ctx)
	require.NoError(t, err)
	require.True(t, current)
	applied, err := m.Up(ctx)
	require.NoError(t, err)
	require.Zero(t, applied, "a migrated database has nothing pending")
}

func TestDownThenUpRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	m := newMigrator(t, pool)
	status, err := m.Status(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, status)

	require.NoError(t, m.Down(ctx))
	current, err := m.Current(ctx)
	require.NoError(t, err)
	require.False(t, current, "after down the newest migration is pending")

	applied, err := m.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, applied)
	var tables int
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'").Scan(&tables))
	require.Zero(t, tables, "every table lives in the switchyard schema")
}

// Console instances that start at once must not race each other's
// migrations: the advisory lock serialises them and each sees success.
func TestConcurrentUpIsSerialised(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	require.NoError(t, newMigrator(t, pool).Down(ctx))

	const instances = 8
	migrators := make([]*migrate.Migrator, instances)
	for i := range migrators {
		// Each instance has its own pool, as separate processes would.
		own, err := pgxpool.New(ctx, pool.Config().ConnString())
		require.NoError(t, err)
		t.Cleanup(own.Close)
		migrators[i] = newMigrator(t, own)
	}
	applied := make([]int, instances)
	errs := make([]error, instances)
	testwait.Together(instances, func(i int) {
		applied[i], errs[i] = migrators[i].Up(ctx)
	})
	total := 0
	for i := range instances {
		require.NoError(t, errs[i])
		total += applied[i]
	}
	require.Equal(t, 1, total, "exactly one instance applies the migration")
}

// schemaSnapshot describes every object of the switchyard schema but goose's
// own table, one sorted line each, from the catalogs: what pg_dump would
// print, without needing pg_dump. Columns are listed in their order (sqlc's
// structs and SELECT * follow it).
func schemaSnapshot(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	const q = `
WITH rels AS (
    SELECT c.oid, c.relname, c.relkind, c.relpersistence, c.reloptions
    FROM pg_class c
    WHERE c.relnamespace = 'switchyard'::regnamespace
      AND c.relname NOT IN ('goose_db_version', 'goose_db_version_id_seq', 'goose_db_version_pkey')
)
SELECT coalesce(string_agg(line, E'\n' ORDER BY line), '') FROM (
    SELECT format('schema comment %s', coalesce(obj_description('switchyard'::regnamespace, 'pg_namespace'), '<none>')) AS line
    UNION ALL
    SELECT format('relation %s kind %s persistence %s options %s comment %s', r.relname, r.relkind,
        r.relpersistence, r.reloptions, obj_description(r.oid, 'pg_class'))
    FROM rels r
    UNION ALL
    SELECT format('column %s %s %s %s not null %s default %s identity %s comment %s', r.relname,
        row_number() OVER (PARTITION BY r.oid ORDER BY a.attnum), a.attname,
        format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid),
        a.attidentity, col_description(r.oid, a.attnum))
    FROM rels r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef d ON d.adrelid = r.oid AND d.adnum = a.attnum
    UNION ALL
    SELECT format('constraint %s %s %s', r.relname, con.conname, pg_get_constraintdef(con.oid))
    FROM rels r JOIN pg_constraint con ON con.conrelid = r.oid
    UNION ALL
    SELECT format('index %s', pg_get_indexdef(r.oid)) FROM rels r WHERE r.relkind = 'i'
    UNION ALL
    SELECT format('view %s %s', r.relname, pg_get_viewdef(r.oid)) FROM rels r WHERE r.relkind = 'v'
    UNION ALL
    SELECT format('trigger %s', pg_get_triggerdef(tg.oid))
    FROM rels r JOIN pg_trigger tg ON tg.tgrelid = r.oid AND NOT tg.tgisinternal
    UNION ALL
    SELECT format('function %s', pg_get_functiondef(p.oid))
    FROM pg_proc p WHERE p.pronamespace = 'switchyard'::regnamespace
    UNION ALL
    SELECT format('sequence owned %s by %s', s.relname, d.refobjid::regclass)
    FROM rels s JOIN pg_depend d ON d.objid = s.oid AND d.classid = 'pg_class'::regclass
        AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
    WHERE s.relkind = 'S'
) lines`
	var snapshot string
	require.NoError(t, pool.QueryRow(context.Background(), q).Scan(&snapshot))
	return snapshot
}

func setVersions(t *testing.T, pool *pgxpool.Pool, versions []int64) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, "DELETE FROM switchyard.goose_db_version WHERE version_id > 0")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.goose_db_version (version_id, is_applied)
		SELECT v, true FROM unnest($1::bigint[]) v`, versions)
	require.NoError(t, err)
}

func appliedVersions(t *testing.T, pool *pgxpool.Pool) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		"SELECT version_id FROM switchyard.goose_db_version WHERE version_id > 0 ORDER BY version_id")
	require.NoError(t, err)
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return versions
}

func span(from, to int64) []int64 {
	var vs []int64
	for v := from; v <= to; v++ {
		vs = append(vs, v)
	}
	return vs
}

// Every migration's Down undoes its Up: rolled back to nothing, the schema
// is empty but for goose's table; migrated again, it is what it was. A
// database stopped after the baseline's first migration is not taken for
// one of the numbering before the baseline.
func TestDownToZeroThenUpRestoresTheSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	m := newMigrator(t, pool)
	migrated := schemaSnapshot(t, pool)
	require.Contains(t, migrated, "relation outbox kind r")
	all := appliedVersions(t, pool)
	require.Equal(t, span(1, int64(len(all))), all, "the template has every migration, numbered without a gap")

	for range len(all) - 1 {
		require.NoError(t, m.Down(ctx))
	}
	require.Equal(t, []int64{1}, appliedVersions(t, pool))
	applied, err := m.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, len(all)-1, applied)
	require.Equal(t, migrated, schemaSnapshot(t, pool))

	for range len(all) {
		require.NoError(t, m.Down(ctx))
	}
	require.Empty(t, appliedVersions(t, pool))
	require.Equal(t, "schema comment <none>", schemaSnapshot(t, pool), "every Down drops what its Up made")

	applied, err = m.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, len(all), applied)
	require.Equal(t, migrated, schemaSnapshot(t, pool))
}

// A database migrated with every migration before the baseline (kept in
// testdata/pre-baseline as they were) has the baseline's schema: Up
// rewrites its version rows, applies only the migrations after the baseline,
// and says so in the log.
func TestPreBaselineDatabaseIsAdopted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fresh := dbtest.New(t)
	all := appliedVersions(t, fresh)
	schema := schemaSnapshot(t, fresh)
	// What the baseline alone makes: the migrations after it rolled back.
	for range len(all) - migrate.BaselineVersion {
		require.NoError(t, newMigrator(t, fresh).Down(ctx))
	}
	baselineSchema := schemaSnapshot(t, fresh)

	pool := dbtest.New(t)
	_, err := pool.Exec(ctx, "DROP SCHEMA switchyard CASCADE; CREATE SCHEMA switchyard")
	require.NoError(t, err)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	oldFS, err := fs.Sub(preBaseline, "testdata/pre-baseline")
	require.NoError(t, err)
	old, err := goose.NewProvider(goose.DialectPostgres, db, oldFS,
		goose.WithTableName("switchyard.goose_db_version"), goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	_, err = old.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, migrate.PreBaselineVersions(), appliedVersions(t, pool))
	require.Equal(t, baselineSchema, schemaSnapshot(t, pool), "the baseline makes what the old migrations made")

	var log bytes.Buffer
	m, err := migrate.New(pool, slog.New(slog.NewTextHandler(&log, nil)))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	applied, err := m.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, len(all)-migrate.BaselineVersion, applied, "only migrations after the baseline are applied")
	require.Equal(t, all, appliedVersions(t, pool))
	require.Equal(t, schema, schemaSnapshot(t, pool))
	require.Contains(t, log.String(), "adopted a database migrated before the migration baseline")
	current, err := m.Current(ctx)
	require.NoError(t, err)
	require.True(t, current)
}

// A database that stopped part of the way through the numbering before
// the baseline matches no baseline version: Up and Down refuse it, say
// what to do, and leave its version rows alone.
func TestPartlyPreBaselineDatabaseIsRefused(t *testing.T) {
	t.Parallel()
	old := migrate.PreBaselineVersions()
	for _, tc := range []struct {
		name     string
		versions []int64
		// oldLayout makes the schema look like the old numbering's.
		oldLayout string
	}{
		{name: "stopped past a gap", versions: old[:len(old)-3]},
		{name: "stopped at the first gap", versions: append(span(1, 10), 12)},
		{name: "stopped before the first gap",
			versions:  span(1, 5),
			oldLayout: "DROP TABLE switchyard.breaker_outcomes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := dbtest.New(t)
			if tc.oldLayout != "" {
				_, err := pool.Exec(ctx, tc.oldLayout)
				require.NoError(t, err)
			}
			setVersions(t, pool, tc.versions)
			m := newMigrator(t, pool)

			_, err := m.Up(ctx)
			require.ErrorIs(t, err, migrate.ErrPartlyPreBaseline)
			require.ErrorContains(t, err, "build from before the baseline")
			require.ErrorIs(t, m.Down(ctx), migrate.ErrPartlyPreBaseline)
			require.Equal(t, tc.versions, appliedVersions(t, pool))
		})
	}
}
