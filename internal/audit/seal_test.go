package audit_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/dbtest"
)

var key = []byte("a sealing key of at least 32 bytes, kept outside")

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	_, err := pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// trail records n rows and returns a sealer for them (with key, or
// unkeyed when key is nil) writing checkpoints to a file of its own.
func trail(t *testing.T, n int, key []byte) (*pgxpool.Pool, *audit.Sealer, string) {
	t.Helper()
	pool := dbtest.New(t)
	for i := range n {
		record(t, pool, audit.Entry{Actor: "op", Action: "replay", Target: fmt.Sprint(i), Reason: "stuck", Outcome: audit.OK})
	}
	file := filepath.Join(t.TempDir(), "checkpoints", "audit.jsonl")
	s, err := audit.NewSealer(pool, audit.SealerConfig{Key: key, CheckpointFile: file, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	require.NoError(t, err)
	return pool, s, file
}

// rechain edits row id as someone who can bypass the trigger would, then
// recomputes the hash of it and of every later row with the schema's own
// function, so that the unkeyed chain verifies again.
func rechain(t *testing.T, pool *pgxpool.Pool, id int64) {
	t.Helper()
	exec(t, pool, `ALTER TABLE switchyard.audit_log DISABLE TRIGGER audit_log_no_update`)
	exec(t, pool, `UPDATE switchyard.audit_log SET reason = 'nothing happened' WHERE id = $1`, id)
	exec(t, pool, `DO $$
		DECLARE r record; prev bytea;
		BEGIN
			FOR r IN SELECT id FROM switchyard.audit_log ORDER BY id LOOP
				IF prev IS NOT NULL THEN
					UPDATE switchyard.audit_log SET prev_hash = prev WHERE id = r.id;
				END IF;
				UPDATE switchyard.audit_log a SET hash = switchyard.audit_row_hash(a.prev_hash, a) WHERE a.id = r.id
					RETURNING hash INTO prev;
			END LOOP;
		END $$`)
}

// A row edited and re-chained with the schema's own function passes the
// unkeyed chain, but not its seal; the sealer then refuses to seal on
// top of it. Seals are append-only like the trail.
func TestKeyedChainFindsARowEditedAndRechained(t *testing.T) {
	t.Parallel()
	pool, s, _ := trail(t, 10, key)
	ctx := context.Background()
	n, err := s.Seal(ctx)
	require.NoError(t, err)
	require.Equal(t, 10, n)
	report, err := audit.Check(ctx, pool, audit.CheckConfig{Key: key})
	require.NoError(t, err)
	require.Equal(t, audit.Report{Rows: 10, Keyed: true, Sealed: 10, Notes: report.Notes}, report)
	for _, sql := range []string{`UPDATE switchyard.audit_seals SET mac = mac`, `DELETE FROM switchyard.audit_seals`, `TRUNCATE switchyard.audit_seals CASCADE`} {
		_, err := pool.Exec(ctx, sql)
		require.ErrorContains(t, err, "append-only", sql)
	}

	var fifth int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM switchyard.audit_log ORDER BY id OFFSET 4 LIMIT 1`).Scan(&fifth))
	rechain(t, pool, fifth)
	_, err = audit.Verify(ctx, pool)
	require.NoError(t, err, "the unkeyed chain cannot tell")
	report, err = audit.Check(ctx, pool, audit.CheckConfig{})
	require.NoError(t, err)
	require.Contains(t, report.Notes[0], "unkeyed", "verify says the chain is unkeyed")

	report, err = audit.Check(ctx, pool, audit.CheckConfig{Key: key})
	require.ErrorIs(t, err, audit.ErrSealBroken)
	require.ErrorContains(t, err, fmt.Sprintf("row %d does not match its seal", fifth))
	require.EqualValues(t, 4, report.Sealed)

	record(t, pool, audit.Entry{Actor: "op", Action: "replay", Outcome: audit.OK})
	_, err = s.Seal(ctx)
	require.ErrorIs(t, err, audit.ErrSealBroken, "no seal on top of a changed trail")
}

// Rows deleted from the end leave a shorter chain that verifies; the
// checkpoint written at Stop shows the truncation, keyed or not.
func TestCheckpointShowsRowsDeletedFromTheEnd(t *testing.T) {
	t.Parallel()
	for _, k := range [][]byte{key, nil} {
		pool, s, file := trail(t, 6, k)
		ctx := context.Background()
		require.NoError(t, s.Start(ctx))
		s.Stop()
		s.Stop()
		cp, err := audit.LastCheckpoint(file)
		require.NoError(t, err)
		require.EqualValues(t, 6, cp.Rows)
		require.Equal(t, k != nil, cp.Keyed)
		report, err := audit.Check(ctx, pool, audit.CheckConfig{Key: k, CheckpointFile: file})
		require.NoError(t, err)
		require.Equal(t, &cp, report.Checkpoint)

		exec(t, pool, `ALTER TABLE switchyard.audit_log DISABLE TRIGGER audit_log_no_update`)
		exec(t, pool, `ALTER TABLE switchyard.audit_seals DISABLE TRIGGER audit_seals_no_update`)
		exec(t, pool, `DELETE FROM switchyard.audit_seals WHERE id > $1 - 2`, cp.ID)
		exec(t, pool, `DELETE FROM switchyard.audit_log WHERE id > $1 - 2`, cp.ID)
		_, err = audit.Verify(ctx, pool)
		require.NoError(t, err, "a shorter chain verifies")
		_, err = audit.Check(ctx, pool, audit.CheckConfig{Key: k, CheckpointFile: file})
		require.ErrorIs(t, err, audit.ErrTruncated)
		require.ErrorContains(t, err, fmt.Sprintf("truncated: the checkpoint of %s recorded 6 rows up to row %d, but the trail now ends at row %d with 4 rows",
			cp.At.Format("2006-01-02 15:04:05Z"), cp.ID, cp.ID-2))

		// A sealer started on the cut trail does not checkpoint it as
		// whole, and nothing it seals hides the cut.
		again, err := audit.NewSealer(pool, audit.SealerConfig{Key: k, CheckpointFile: file})
		require.NoError(t, err)
		require.NoError(t, again.Start(ctx))
		record(t, pool, audit.Entry{Actor: "op", Action: "replay", Outcome: audit.OK})
		again.Stop()
		last, err := audit.LastCheckpoint(file)
		require.NoError(t, err)
		require.Equal(t, cp, last, "no checkpoint of the cut trail")
		_, err = audit.Check(ctx, pool, audit.CheckConfig{Key: k, CheckpointFile: file})
		require.ErrorIs(t, err, audit.ErrTruncated)
		require.ErrorContains(t, err, fmt.Sprintf("row %d, the head of the checkpoint of %s (6 rows), is missing: rows were deleted; the trail now has 5 rows, up to row %d",
			cp.ID, cp.At.Format("2006-01-02 15:04:05Z"), cp.ID+1))

		// A checkpoint line forged without the key does not verify.
		if k != nil {
			forged := cp
			forged.ID, forged.Rows = cp.ID-2, 4
			require.NoError(t, pool.QueryRow(ctx, `SELECT encode(hash, 'hex') FROM switchyard.audit_log WHERE id = $1`, forged.ID).Scan(&forged.Hash))
			require.NoError(t, audit.AppendCheckpoint(file, forged))
			_, err = audit.Check(ctx, pool, audit.CheckConfig{Key: k, CheckpointFile: file})
			require.ErrorIs(t, err, audit.ErrCheckpointMismatch)
			require.ErrorContains(t, err, "does not verify under the key")
		}
	}
}

// A running sealer seals new rows within its poll and writes a checkpoint
// once CheckpointRows rows were added since the last one.
func TestSealerSealsAndCheckpointsAsRowsArrive(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	s, err := audit.NewSealer(pool, audit.SealerConfig{Key: key, CheckpointFile: file, CheckpointRows: 3, Poll: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	require.NoError(t, err)
	_, err = audit.NewSealer(pool, audit.SealerConfig{Key: []byte("short")})
	require.Error(t, err, "a key under 32 bytes is refused")
	checkpointOf := func(rows int64) func() bool {
		return func() bool {
			cp, err := audit.LastCheckpoint(file)
			return err == nil && cp.Rows == rows
		}
	}
	record(t, pool, audit.Entry{Actor: "op", Action: "replay", Outcome: audit.OK})
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(s.Stop)
	require.Eventually(t, checkpointOf(1), 30*time.Second, 10*time.Millisecond, "a checkpoint at start")
	for i := range 3 {
		record(t, pool, audit.Entry{Actor: "op", Action: "replay", Target: fmt.Sprint(i), Outcome: audit.OK})
	}
	require.Eventually(t, checkpointOf(4), 30*time.Second, 10*time.Millisecond, "a checkpoint after 3 more rows")
	report, err := audit.Check(context.Background(), pool, audit.CheckConfig{Key: key, CheckpointFile: file})
	require.NoError(t, err)
	require.EqualValues(t, 4, report.Sealed)
}
