package audit

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/queries"
)

// A row recorded between a tick's Seal and its checkpoint has no seal yet:
// the checkpoint vouches for the newest sealed row, so that Check, which
// refuses a checkpoint beyond the seals, accepts it. The interleaving, which
// a running sealer meets only by chance (a CI run once did), is set up here
// by hand: rows sealed, one more recorded, then the checkpoint's reads.
func TestACheckpointVouchesForSealedRowsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	key := []byte("a sealing key of at least 32 bytes, kept outside")
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	s, err := NewSealer(pool, SealerConfig{Key: key, CheckpointFile: file})
	require.NoError(t, err)
	record := func(target string) {
		t.Helper()
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := Record(ctx, tx, Entry{Actor: "op", Action: "replay", Target: target, Outcome: OK})
			return err
		}))
	}
	for _, target := range []string{"1", "2", "3"} {
		record(target)
	}
	sealed, err := s.Seal(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, sealed)
	record("4") // after the tick's Seal, before its checkpoint

	q := queries.New(pool)
	id, err := s.vouchableID(ctx, q)
	require.NoError(t, err)
	newest, err := q.AuditHeadIDGet(ctx)
	require.NoError(t, err)
	require.Greater(t, newest, id, "the newest row is not sealed yet")
	head, err := s.vouchableHead(ctx, q, id)
	require.NoError(t, err)
	require.EqualValues(t, 3, head.Rows)
	require.NoError(t, s.write(newCheckpoint(key, head.ID, head.Rows, head.Hash, time.Now())))

	report, err := Check(ctx, pool, CheckConfig{Key: key, CheckpointFile: file})
	require.NoError(t, err, "the checkpoint vouches for rows that are sealed")
	require.EqualValues(t, 3, report.Sealed)
}
