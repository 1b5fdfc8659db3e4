package bench

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/pgembed"
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

	requireAggregatesDeliveredInOrder(t, target, 7)
}

// requireAggregatesDeliveredInOrder checks that each of the bench's want
// aggregates has its messages numbered 1..n without a gap or a repeat,
// across the history and the drain, all delivered, and its row saying
// all n are done.
func requireAggregatesDeliveredInOrder(t *testing.T, target *benchTarget, want int) {
	t.Helper()
	var aggregates, broken int
	require.NoError(t, target.pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE NOT ok) FROM (
			SELECT a.aggregate_id, a.last_seq = a.done_seq AND a.last_seq = count(o.*) AND a.last_seq = max(o.aggregate_seq)
				AND count(DISTINCT o.aggregate_seq) = count(o.*) AND bool_and(o.state = 'delivered') AS ok
			FROM switchyard.outbox_aggregates a
			JOIN switchyard.outbox o USING (destination, aggregate_type, aggregate_id)
			GROUP BY a.aggregate_id, a.last_seq, a.done_seq) AS s`).Scan(&aggregates, &broken))
	require.Equal(t, want, aggregates)
	require.Zero(t, broken)
}

// --retained-template seeds the history once, into a database of that
// name that stays, and copies it as the bench's database from then on:
// a run after the first seeds nothing and drains after the same history,
// its messages continuing the history's aggregates (the copy's
// destination is the template's); the drains write only to their copies.
// A template of another history, or one with no finished history, is
// refused. On a cluster of the test's own: the shared test cluster's role
// may not create databases.
func TestBenchDispatchCopiesItsHistoryFromATemplate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster, err := pgembed.Start(ctx, pgembed.Config{DataDir: filepath.Join(dataParent(t), "pg"),
		Settings: map[string]string{"fsync": "off"}, Throwaway: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cluster.Stop()) })
	url := cluster.DSN()
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.Background()) })
	template := "switchyard_bench_history_" + newBenchSuffix()
	t.Cleanup(func() {
		_, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{template}.Sanitize()+" WITH (FORCE)")
		require.NoError(t, err)
	})
	args := []string{"--messages", "300", "--aggregates", "7", "--workers", "2",
		"--retained", "1000", "--retained-dead", "40", "--retained-template", template}

	var destination string
	for run, seeds := range []bool{true, false} {
		target, bench := newRetainedRunOn(t, url, args...)
		m, err := bench.drain(ctx)
		require.NoError(t, err, "run %d delivers its 300 messages", run+1)
		require.Equal(t, template, target.template.name)
		require.Equal(t, seeds, target.template.seeded > 0, "only the first run seeds the template")
		require.Positive(t, m.retainedSeed)
		if run == 0 {
			destination = target.destinationName()
		}
		require.Equal(t, destination, target.destinationName(), "every copy drains the template's destination")
		var before, after int
		require.NoError(t, target.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE id <= $1), count(*) FILTER (WHERE id > $1)
			FROM switchyard.outbox`, m.firstID).Scan(&before, &after))
		require.Equal(t, 1040, before, "run %d drains after the whole history", run+1)
		require.Equal(t, 300, after)
		requireAggregatesDeliveredInOrder(t, target, 7)
		r := m.result(bench.opts, target, benchSettings{})
		require.Equal(t, template, r.RetainedTemplate)
		require.Equal(t, seeds, r.RetainedTemplateSeeded)
	}

	config, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	config.Database = template
	conn, err := pgx.ConnectConfig(ctx, config)
	require.NoError(t, err)
	var held int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox`).Scan(&held))
	require.NoError(t, conn.Close(ctx))
	require.Equal(t, 1040, held, "the template holds the history alone")

	other := append(slices.Clone(args[:len(args)-4]), "--retained-dead", "41", "--retained-template", template)
	_, err = openRetainedTarget(t, url, other...)
	require.ErrorContains(t, err, "holds --retained 1000 --retained-dead 40 --aggregates 7")

	unfinished := "switchyard_bench_history_" + newBenchSuffix()
	_, err = admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{unfinished}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{unfinished}.Sanitize())
		require.NoError(t, err)
	})
	_, err = openRetainedTarget(t, url, append(slices.Clone(args[:len(args)-1]), unfinished)...)
	require.ErrorContains(t, err, "holds no finished bench history")
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
	return newRetainedRunOn(t, dbtest.NewURL(t), args...)
}

// newRetainedRunOn is newRetainedRun on the server and database of url.
func newRetainedRunOn(t *testing.T, url string, args ...string) (*benchTarget, *benchRun) {
	t.Helper()
	target, err := openRetainedTarget(t, url, args...)
	require.NoError(t, err)
	opts, err := parseBenchOptions(args)
	require.NoError(t, err)
	run, err := newBenchRun(context.Background(), target, opts, slog.New(slog.NewTextHandler(t.Output(), nil)))
	require.NoError(t, err)
	t.Cleanup(run.close)
	return target, run
}

// openRetainedTarget opens the bench's database for args from url,
// closed when the test ends.
func openRetainedTarget(t *testing.T, url string, args ...string) (*benchTarget, error) {
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	opts, err := parseBenchOptions(args)
	require.NoError(t, err)
	db, err := postgres.Open(ctx, postgres.Config{URL: url}, logger)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	target, err := openBenchTarget(ctx, db, opts, logger)
	if err == nil {
		t.Cleanup(func() { target.close(ctx, logger) })
	}
	return target, err
}
