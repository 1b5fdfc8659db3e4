package bench

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/postgres"
)

// --retained seeds the history before the drain: delivered messages in the
// drain's aggregates, whose sequences the drain's messages continue, and
// dead unordered ones with their attempts and dead-letter groups; the
// drain then delivers exactly its own messages, after the history.
func TestBenchDispatchDrainsAfterARetainedHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target, run := newRetainedRun(t, "--messages", "300", "--aggregates", "7", "--workers", "2",
		"--retained", "1000", "--retained-dead", "40")
	m, err := run.drain(ctx)
	require.NoError(t, err, "the drain delivers its 300 messages")
	require.Positive(t, m.retainedSeed)
	require.Len(t, m.latency, 300)

	var before, delivered, dead, attempts, groups int
	require.NoError(t, target.pool.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE id <= $1),
			count(*) FILTER (WHERE id <= $1 AND state = 'delivered' AND delivered_by IS NOT NULL),
			count(*) FILTER (WHERE id <= $1 AND state = 'dead' AND aggregate_id = '' AND error_fingerprint IS NOT NULL),
			(SELECT count(*) FROM switchyard.outbox_attempts),
			(SELECT count(*) FROM switchyard.dead_letter_groups)
		FROM switchyard.outbox`, m.firstID).Scan(&before, &delivered, &dead, &attempts, &groups))
	require.Equal(t, 1040, before, "the history comes before the drain's messages")
	require.Equal(t, 1000, delivered)
	require.Equal(t, 40, dead)
	require.Equal(t, 120, attempts, "three failed attempts per dead message, none for a delivery")
	require.Equal(t, 40, groups)

	// Each aggregate's messages are numbered 1..n without a gap or a
	// repeat, across the history and the drain, and its row says all n
	// are done.
	var aggregates, broken int
	require.NoError(t, target.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE NOT ok) FROM (
			SELECT a.aggregate_id, a.last_seq = a.done_seq AND a.last_seq = count(o.*) AND a.last_seq = max(o.aggregate_seq)
				AND count(DISTINCT o.aggregate_seq) = count(o.*) AND bool_and(o.state = 'delivered') AS ok
			FROM switchyard.outbox_aggregates a
			JOIN switchyard.outbox o USING (destination, aggregate_type, aggregate_id)
			GROUP BY a.aggregate_id, a.last_seq, a.done_seq) AS s`).Scan(&aggregates, &broken))
	require.Equal(t, 7, aggregates)
	require.Zero(t, broken)
}

// The history is rows in a database of the bench's own: in place, it is
// refused before anything is written.
func TestBenchDispatchRetainedRefusesInPlace(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	_, err := runBench(t, Config{Database: postgres.Config{URL: url}}, "dispatch", "--messages", "10", "--retained", "100")
	require.ErrorContains(t, err, "CREATEDB")
	requireNoBenchRows(t, url)
}

// Offered load, too, may run after a retained history: the measured
// messages are the ones enqueued after it.
func TestBenchDispatchOffersLoadAfterARetainedHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target, run := newRetainedRun(t, "--rate", "100", "--seconds", "1", "--aggregates", "5", "--workers", "2",
		"--retained", "200", "--retained-dead", "10")
	m, err := run.offered(ctx)
	require.NoError(t, err, "the offered messages are delivered")
	require.Positive(t, m.retainedSeed)
	require.Len(t, m.latency, 100)
	require.NotEmpty(t, m.cpu.Method, "offered load reports its CPU too")
	require.Positive(t, m.cpu.GoMsPer1k)
	var before, after int
	require.NoError(t, target.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE id <= $1), count(*) FILTER (WHERE id > $1)
		FROM switchyard.outbox`, m.firstID).Scan(&before, &after))
	require.Equal(t, 210, before, "the history comes before the offered messages")
	require.Equal(t, 100, after)
}

// newRetainedRun is a bench run with args in a database of its own (as
// --retained requires), closed when the test ends.
func newRetainedRun(t *testing.T, args ...string) (*benchTarget, *benchRun) {
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	opts, err := parseBenchOptions(args)
	require.NoError(t, err)
	db, err := postgres.Open(ctx, postgres.Config{URL: dbtest.NewURL(t)}, logger)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	target, err := openBenchTarget(ctx, db, opts, logger)
	require.NoError(t, err)
	t.Cleanup(func() { target.close(ctx, logger) })
	run, err := newBenchRun(ctx, target, opts, logger)
	require.NoError(t, err)
	t.Cleanup(run.close)
	return target, run
}
