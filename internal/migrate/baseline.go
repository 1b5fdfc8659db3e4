package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Before the first release the migrations were squashed into a baseline,
// one file per area: 00001_schema.sql through 00013_triage.sql. A database
// migrated before then holds the old numbering in goose's table (1 to 110,
// with gaps), which goose refuses as missing migrations. Its schema is the
// baseline's, object for object (migrations/schema.sql, the pg_dump of the
// migrated schema, did not change by a byte), so adopting it rewrites the
// version rows and nothing else.
const baselineVersion = 13

// preBaselineVersions are the versions of the migrations before the
// squash, in order; 110 was the last.
var preBaselineVersions = []int64{
	1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 20, 21, 22, 25, 35, 36, 40, 45,
	46, 50, 65, 66, 85, 95, 96, 100, 105, 110,
}

// ErrPartlyPreBaseline is returned by Up and Down for a database that was
// migrated part of the way with the numbering from before the baseline: its
// schema matches no baseline version, so it cannot be adopted.
var ErrPartlyPreBaseline = errors.New("migrate: database partly migrated with the numbering from before the baseline")

const (
	versionTableExists = "SELECT to_regclass('" + versionTable + "') IS NOT NULL"
	appliedVersions    = "SELECT DISTINCT version_id FROM " + versionTable + " WHERE version_id > 0 ORDER BY version_id"
	dropOldVersions    = "DELETE FROM " + versionTable + " WHERE version_id > 0"
	insertBaseline     = "INSERT INTO " + versionTable + " (version_id, is_applied) SELECT v, true FROM generate_series(1, $1::bigint) v"
	// A prefix 1..k (k <= 10) of the old numbering reads like the
	// baseline's 1..k; the schema tells them apart. The old 00002 created
	// the outbox and only the old 00105 breaker_outcomes, and the old
	// 00001 left no advisory_xact_lock (00005 made it); the baseline's
	// 00001 creates advisory_xact_lock and its 00002 breaker_outcomes,
	// before any outbox.
	oldLayout = `SELECT to_regclass('switchyard.breaker_outcomes') IS NULL
		AND (to_regclass('switchyard.outbox') IS NOT NULL
			OR to_regprocedure('switchyard.advisory_xact_lock(bigint, integer)') IS NULL)`
)

// adoptPreBaseline rewrites the version rows of a database fully migrated
// with the old numbering to the baseline's, in one transaction, and refuses
// a database that stopped part of the way. Any other state is goose's to
// judge. The caller holds the migration lock on conn.
func (m *Migrator) adoptPreBaseline(ctx context.Context, conn *sql.Conn) error {
	var adopted bool
	err := conn.Raw(func(driverConn any) error {
		pc := driverConn.(*stdlib.Conn).Conn()
		var exists bool
		if err := pc.QueryRow(ctx, versionTableExists).Scan(&exists); err != nil {
			return fmt.Errorf("find version table: %w", err)
		}
		if !exists {
			return nil
		}
		return pgx.BeginFunc(ctx, pc, func(tx pgx.Tx) (err error) {
			adopted, err = adoptTx(ctx, tx)
			return err
		})
	})
	if err != nil {
		return err
	}
	if adopted {
		m.logger.Info("adopted a database migrated before the migration baseline: its schema is the baseline's, so only goose's version rows changed",
			slog.Int64("old_version", preBaselineVersions[len(preBaselineVersions)-1]),
			slog.Int64("baseline_version", baselineVersion))
	}
	return nil
}

// adoptTx is adoptPreBaseline's transaction. It reports whether it rewrote
// the version rows.
func adoptTx(ctx context.Context, tx pgx.Tx) (bool, error) {
	rows, _ := tx.Query(ctx, appliedVersions)
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return false, fmt.Errorf("read versions: %w", err)
	}
	old, err := isPreBaseline(ctx, tx, applied)
	if err != nil || !old {
		return false, err
	}
	if !slices.Equal(applied, preBaselineVersions) {
		return false, fmt.Errorf("%w: it holds versions up to %d of the old numbering, whose last is %d. "+
			"Finish it with a build from before the baseline (console migrate up), then run this one; "+
			"or, if it holds nothing worth keeping, drop the switchyard schema and migrate afresh",
			ErrPartlyPreBaseline, applied[len(applied)-1], preBaselineVersions[len(preBaselineVersions)-1])
	}
	if _, err := tx.Exec(ctx, dropOldVersions); err != nil {
		return false, fmt.Errorf("drop pre-baseline versions: %w", err)
	}
	if _, err := tx.Exec(ctx, insertBaseline, baselineVersion); err != nil {
		return false, fmt.Errorf("record baseline versions: %w", err)
	}
	return true, nil
}

// isPreBaseline reports whether applied (ascending) are versions of the old
// numbering: all of them, or a part that no baseline database can hold.
// The baseline's numbering has no gaps, so a set with a gap that the old
// numbering explains is old; a set without one is old only if it is a
// prefix of the old numbering and the schema looks like the old one.
func isPreBaseline(ctx context.Context, tx pgx.Tx, applied []int64) (bool, error) {
	if len(applied) == 0 {
		return false, nil
	}
	for _, v := range applied {
		if _, ok := slices.BinarySearch(preBaselineVersions, v); !ok {
			return false, nil
		}
	}
	if applied[len(applied)-1] != int64(len(applied)) {
		return true, nil // a gap, as 11 and 14 to 19 were
	}
	var old bool
	if err := tx.QueryRow(ctx, oldLayout).Scan(&old); err != nil {
		return false, fmt.Errorf("inspect schema: %w", err)
	}
	return old, nil
}
