package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/demo/demodb"
	"github.com/switchyard/switchyard/internal/postgres"
)

// The inbox bench runs in the test's database (the test role may not create
// databases), checks its own effect, reports the keys, and leaves
// no row behind.
func TestBenchInboxInPlace(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	cfg := Config{Database: postgres.Config{URL: url}}
	var out bytes.Buffer
	err := Run(context.Background(), cfg, []string{"inbox", "--events", "600", "--duplicates", "0.2", "--concurrency", "8"},
		slog.New(slog.NewTextHandler(t.Output(), nil)), &out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var keys map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &keys), "the last line is one JSON object")
	for _, k := range []string{"events", "duplicates", "events_per_sec", "p50_ms", "p99_ms", "settings"} {
		require.Contains(t, keys, k)
	}
	var res inboxBenchResult
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &res))
	require.Equal(t, 600, res.Events)
	require.Positive(t, res.Duplicates)
	require.Less(t, res.Duplicates, 600)
	require.Positive(t, res.EventsPerSec)
	require.GreaterOrEqual(t, res.P99Ms, res.P50Ms)
	require.Equal(t, "in_place", res.Database)
	require.NotNil(t, res.CPU, "CPU per event is reported")
	require.Positive(t, res.CPU.GoMsPer1k)
	require.Positive(t, res.CPU.PostgresMsPer1k, "the server's processes are readable here")
	requireInboxBenchRowsGone(t, url)
}

// requireInboxBenchRowsGone fails unless every row an inbox bench writes,
// and the demo schema, are gone from the database at url.
func requireInboxBenchRowsGone(t *testing.T, url string) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	defer pool.Close()
	var left int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM switchyard.inbox_events) + (SELECT count(*) FROM switchyard.inbox_duplicates) +
		(SELECT count(*) FROM switchyard.inbox_event_duplicates) +
		(SELECT count(*) FROM pg_namespace WHERE nspname = 'switchyard_demo')`).Scan(&left))
	require.Zero(t, left, "the bench removed its rows, and the demo schema it installed")
}

// The side by side runs pgbench's floor and the inbox by turns in the
// test's database, each side's effect checked (one customer per recorded
// event), and prints the medians, the ratio and each run's CPU last.
func TestBenchInboxFloorInPlace(t *testing.T) {
	t.Parallel()
	url, res := floorInPlace(t)
	require.Len(t, res.Inbox.Runs, 2)
	require.Len(t, res.Floor.Runs, 2)
	require.Equal(t, [][]string{{"floor", "inbox"}, {"inbox", "floor"}}, res.Order, "the rounds alternate")
	for _, run := range res.Floor.Runs {
		require.Equal(t, 400, run.Events, "4 clients, 100 transactions each")
		require.Positive(t, run.Duplicates, "a tenth of the floor's events repeat an earlier one")
		require.Less(t, run.Duplicates, 200)
		require.Positive(t, run.ClientMsPer1k, "pgbench's CPU is counted")
		require.Positive(t, run.ServerMsPer1k, "the server's CPU is counted, its ended backends too")
	}
	for _, run := range res.Inbox.Runs {
		require.Equal(t, 400, run.Events)
		require.Positive(t, run.ServerMsPer1k)
		require.GreaterOrEqual(t, run.NewConnections, int64(4), "every run on new backends, its 4 clients' at least, as pgbench's")
	}
	require.Positive(t, res.InboxEventsPerSec)
	require.Positive(t, res.FloorEventsPerSec)
	require.InDelta(t, res.InboxEventsPerSec/res.FloorEventsPerSec, res.Ratio, 0.001)
	require.Contains(t, res.Pgbench, "pgbench")
	require.False(t, res.Checkpoints, "in place, the bench neither empties tables nor checkpoints")
	requireInboxBenchRowsGone(t, url)
}

// floorInPlace runs `bench inbox --floor` in the test's database, 2 rounds
// of 400 events from 4 clients, with args added, and returns the database
// and the result its last line holds.
func floorInPlace(t *testing.T, args ...string) (string, inboxFloorResult) {
	t.Helper()
	url := dbtest.NewURL(t)
	cfg := Config{Database: postgres.Config{URL: url}}
	var out bytes.Buffer
	err := Run(context.Background(), cfg, append([]string{"inbox", "--floor", "--rounds", "2", "--events", "400", "--concurrency", "4"}, args...),
		slog.New(slog.NewTextHandler(t.Output(), nil)), &out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res inboxFloorResult
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &res), "the last line is one JSON object")
	return url, res
}

// With --handler forward the source is a row of switchyard.inbox_sources
// naming the built-in forward handler: the bench checks that every unique
// event became exactly one message (none for a duplicate), says so in its
// JSON, and leaves no row behind in place.
func TestBenchInboxForwardInPlace(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	cfg := Config{Database: postgres.Config{URL: url}}
	var out bytes.Buffer
	err := Run(context.Background(), cfg, []string{"inbox", "--handler", "forward", "--events", "500", "--duplicates", "0.2", "--concurrency", "8"},
		slog.New(slog.NewTextHandler(t.Output(), nil)), &out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res inboxBenchResult
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &res))
	require.Equal(t, "forward", res.Handler)
	require.Equal(t, 500, res.Events)
	require.Positive(t, res.Duplicates)
	require.Positive(t, res.EventsPerSec)
	requireForwardBenchRowsGone(t, url)
}

// requireForwardBenchRowsGone fails unless every row a forward bench
// writes (its sources and destination, events and messages) is gone from
// the database at url.
func requireForwardBenchRowsGone(t *testing.T, url string) {
	t.Helper()
	requireInboxBenchRowsGone(t, url)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	defer pool.Close()
	var left int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM switchyard.inbox_event_messages) + (SELECT count(*) FROM switchyard.inbox_sources) +
		(SELECT count(*) FROM switchyard.outbox) + (SELECT count(*) FROM switchyard.outbox_aggregates) +
		(SELECT count(*) FROM switchyard.destinations)`).Scan(&left))
	require.Zero(t, left, "the bench removed its sources, destination and messages")
}

// With --floor --handler forward, the floor is the claim and the forward
// handler's one statement (inbox_floor_forward.pgbench): both sides'
// effects are checked (one message per recorded event, linked to it), the
// medians and ratio printed, and in place no row is left behind.
func TestBenchInboxForwardFloorInPlace(t *testing.T) {
	t.Parallel()
	url, res := floorInPlace(t, "--handler", "forward")
	require.Equal(t, "forward", res.Handler)
	require.Len(t, res.Inbox.Runs, 2)
	require.Len(t, res.Floor.Runs, 2)
	for _, run := range res.Floor.Runs {
		require.Equal(t, 400, run.Events)
		require.Positive(t, run.Duplicates, "a tenth of the floor's events repeat an earlier one")
		require.Less(t, run.Duplicates, 200)
	}
	require.Positive(t, res.Ratio)
	requireForwardBenchRowsGone(t, url)
}

// The forward floor's check can fail: an event recorded without its
// message is found.
func TestBenchInboxForwardFloorCheckFindsAMissingMessage(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	target := &benchTarget{pool: pool, suffix: "check"}
	cleanup, err := installForward(ctx, target, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer cleanup()
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.inbox_events (source, event_id, payload, status) VALUES ('floor-1', 'e1', '{}', 'processed')`)
	require.NoError(t, err)
	f := &inboxFloor{env: &benchEnv{target: target}, opts: inboxBenchOptions{handler: "forward"}}
	_, err = f.checkFloor(ctx, "floor-1")
	require.ErrorContains(t, err, "1 events recorded, 0 messages linked to their events")
}

// The forward check can fail: a message missing for one event is found.
func TestBenchInboxForwardCheckFindsAMissingMessage(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	target := &benchTarget{pool: pool, suffix: "check"}
	cleanup, err := installForward(ctx, target, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer cleanup()
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.inbox_events (source, event_id, payload, status) VALUES ($1, 'e1', '{}', 'processed')`, target.inboxSource())
	require.NoError(t, err)
	run := &inboxBenchRun{opts: inboxBenchOptions{handler: "forward"}, target: target, source: target.inboxSource(), unique: 1}
	require.ErrorContains(t, run.check(ctx), "1 events processed, 0 messages")
}

func TestBenchInboxRejectsBadArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"inbox", "--events", "0"},
		{"inbox", "--duplicates", "1"},
		{"inbox", "--concurrency", "0"},
		{"inbox", "extra"},
		{"inbox", "--floor", "--rounds", "0"},
		{"inbox", "--floor", "--cpuprofile", "x.prof"},
		{"inbox", "--handler", "sql"},
	} {
		cfg := Config{Database: postgres.Config{URL: "postgres://127.0.0.1:1/none"}}
		err := Run(context.Background(), cfg, args, slog.New(slog.DiscardHandler), io.Discard)
		require.Error(t, err, "%q", args)
		require.NotContains(t, err.Error(), "cannot reach the database", "%q is refused before connecting", args)
	}
	cfg := Config{}
	var out bytes.Buffer
	require.NoError(t, Run(context.Background(), cfg, []string{"inbox", "-h"}, slog.New(slog.DiscardHandler), &out))
	require.Contains(t, out.String(), "-duplicates")
}

// pgbench is given the server's TLS mode as libpq spells it: pgx's
// default (no sslmode in DATABASE_URL) is prefer, which a server without
// TLS answers; require would refuse it.
func TestFloorConninfoKeepsTheTLSMode(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"postgres://u@127.0.0.1:5432/db":                     "sslmode=prefer",
		"postgres://u@127.0.0.1:5432/db?sslmode=prefer":      "sslmode=prefer",
		"postgres://u@127.0.0.1:5432/db?sslmode=disable":     "sslmode=disable",
		"postgres://u@127.0.0.1:5432/db?sslmode=require":     "sslmode=require",
		"postgres://u:p@127.0.0.1:5432/db?sslmode=verify-ca": "sslmode=require",
	} {
		c, err := pgconn.ParseConfig(url)
		require.NoError(t, err)
		conninfo, _ := libpqConninfo(*c)
		require.Contains(t, conninfo, " "+want+" ", url)
	}
}

// In a database of the bench's own, the side by side keeps autovacuum off
// every table both sides write, the demo's customers included (its visit
// once a minute fell in whichever run was going on); in place it changes
// no table's settings.
func TestBenchInboxFloorHoldsAutovacuumOnlyInItsOwnDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbtest.NewURL(t))
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, demodb.Install(ctx, pool))
	held := func() []string {
		rows, err := pool.Query(ctx, `SELECT n.nspname || '.' || c.relname FROM pg_class c
			JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.reloptions @> '{autovacuum_enabled=false}' ORDER BY 1`)
		require.NoError(t, err)
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return tables
	}
	require.NoError(t, holdAutovacuum(ctx, &benchTarget{pool: pool}))
	require.Empty(t, held(), "in place, no table's settings change")

	require.NoError(t, holdAutovacuum(ctx, &benchTarget{pool: pool, created: true}))
	want := append(slices.Clone(inboxFloorTables), "switchyard_demo.customers")
	slices.Sort(want)
	require.Equal(t, want, held())
}
