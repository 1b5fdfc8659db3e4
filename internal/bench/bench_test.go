package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/pgembed"
	"github.com/switchyard/switchyard/internal/postgres"
)

// benchJSONKeys are the keys the issue and BENCHMARKS.md rely on.
var benchJSONKeys = []string{"messages", "aggregates", "workers", "batch", "destination", "mode", "seconds",
	"messages_per_sec", "p50_ms", "p99_ms", "round_trips_per_message", "round_trips_method", "settings"}

// runBench runs `console bench <args>` on the database server of cfg and
// returns the parsed last line of its output.
func runBench(t *testing.T, cfg Config, args ...string) (benchResult, error) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	var out bytes.Buffer
	if err := Run(context.Background(), cfg, args, logger, &out); err != nil {
		return benchResult{}, err
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	t.Log(last)
	var keys map[string]any
	require.NoError(t, json.Unmarshal([]byte(last), &keys), "the last line is one JSON object")
	for _, k := range benchJSONKeys {
		require.Contains(t, keys, k)
	}
	var res benchResult
	require.NoError(t, json.Unmarshal([]byte(last), &res))
	return res, nil
}

// The bench runs in the test's database (the test role may not create
// databases), measures sane figures, and leaves no row behind.
func TestBenchDispatchInPlace(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		mode string
		want int
	}{
		{"noop ordered", []string{"--messages", "2000", "--aggregates", "50", "--workers", "2"}, "drain", 2000},
		{"noop unordered", []string{"--messages", "1000", "--aggregates", "0", "--workers", "2", "--batch", "100"}, "drain", 1000},
		{"http ordered", []string{"--messages", "500", "--aggregates", "20", "--workers", "2", "--destination", "http", "--http-floor"}, "drain", 500},
		{"offered load", []string{"--rate", "200", "--seconds", "2", "--aggregates", "50", "--workers", "2"}, "offered", 400},
		{"offered load, local wake", []string{"--rate", "100", "--seconds", "1", "--workers", "2", "--wake", "local"}, "offered", 100},
		{"offered load, shared NOTIFY", []string{"--rate", "200", "--seconds", "1", "--workers", "2", "--wake", "shared"}, "offered", 200},
		// 100 untimed messages first: the figures describe the 100 after
		// them, and --latency-out (a file of the test's own) lists them.
		{"offered load after a warm-up", []string{"--rate", "100", "--warmup-seconds", "1", "--seconds", "1", "--workers", "2", "--wake", "shared", "--latency-out", latencyFile}, "offered", 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := dbtest.NewURL(t)
			args := slices.Clone(tc.args)
			latencies := filepath.Join(t.TempDir(), "latencies.csv")
			if i := slices.Index(args, latencyFile); i >= 0 {
				args[i] = latencies
			}
			res, err := runBench(t, Config{Database: postgres.Config{URL: url}}, append([]string{"dispatch"}, args...)...)
			require.NoError(t, err)
			require.Equal(t, tc.want, res.Messages)
			require.Equal(t, tc.mode, res.Mode)
			require.Equal(t, "in_place", res.Database)
			require.Positive(t, res.MessagesPerSec)
			require.Positive(t, res.RoundTripsPerMessage)
			require.GreaterOrEqual(t, res.P50Ms, 0.0)
			require.GreaterOrEqual(t, res.P99Ms, res.P50Ms)
			require.GreaterOrEqual(t, res.MaxMs, res.P99Ms)
			if tc.mode == "offered" {
				// The enqueuing transactions, timed; and each message from
				// its COMMIT on, a part of its time from BEGIN.
				require.Positive(t, res.EnqueueP50Ms)
				require.GreaterOrEqual(t, res.EnqueueP99Ms, res.EnqueueP50Ms)
				require.Positive(t, res.CommitP99Ms)
				require.GreaterOrEqual(t, res.CommitP99Ms, res.CommitP50Ms)
				require.LessOrEqual(t, res.CommitP50Ms, res.P50Ms)
				require.LessOrEqual(t, res.CommitP99Ms, res.P99Ms)
				// The messages at or over the p99 were committed in at
				// least one window of 100 ms, and at most one each.
				require.Positive(t, res.CommitP99Windows)
				require.LessOrEqual(t, res.CommitP99Windows, max(res.Messages/100, 1)+1)
				if slices.Contains(tc.args, "--latency-out") {
					requireLatencyFile(t, latencies, res)
				}
				if slices.Contains(tc.args, "--warmup-seconds") {
					require.Equal(t, 1, res.WarmupSeconds)
					require.Positive(t, res.WarmupCommitP99Ms, "the warm-up's own latency is reported apart")
				} else {
					require.Zero(t, res.WarmupCommitP99Ms)
				}
			} else {
				require.Zero(t, res.EnqueueP99Ms, "a drain enqueues before it is timed")
				require.Zero(t, res.CommitP99Ms)
				require.Zero(t, res.CommitP99Windows)
				// Where the drain's buffers went, the outbox's heap among them.
				require.True(t, slices.ContainsFunc(res.ServerRelations, func(r serverRelation) bool {
					return r.Name == "outbox" && r.Buffers >= int64(res.Messages)/100
				}), "%+v", res.ServerRelations)
			}
			if slices.Contains(tc.args, "--http-floor") {
				// As many signed requests again, each verified by the
				// receiver (a refused one fails the bench), measured apart.
				require.NotNil(t, res.HTTPFloor)
				require.Equal(t, tc.want, res.HTTPFloor.Requests)
				require.Equal(t, 16, res.HTTPFloor.Concurrency)
				require.Positive(t, res.HTTPFloor.RequestsPerSec)
				require.Positive(t, res.HTTPFloor.GoMsPer1k)
			} else {
				require.Nil(t, res.HTTPFloor)
			}
			require.NotEmpty(t, res.Settings.ServerVersion)
			require.Equal(t, "off", res.Settings.Fsync, "dbtest's cluster runs with fsync off")
			require.False(t, res.Settings.Embedded)
			requireNoBenchRows(t, url)
		})
	}
}

// latencyFile stands, in a case's arguments, for a file in the test's own
// directory.
const latencyFile = "LATENCY_FILE"

// requireLatencyFile checks what --latency-out wrote: a header, then one
// row per timed message (none of the warm-up's) in commit order, whose
// latencies give the result's commit_p99_ms again.
func requireLatencyFile(t *testing.T, path string, res benchResult) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	require.Equal(t, "message,committed_unix_ns,commit_to_delivered_us", lines[0])
	require.Len(t, lines[1:], res.Messages)
	seen := map[int]bool{}
	var latencies durations
	var last int64
	for _, line := range lines[1:] {
		var index int
		var committed, micros int64
		_, err := fmt.Sscanf(line, "%d,%d,%d", &index, &committed, &micros)
		require.NoError(t, err, line)
		require.GreaterOrEqual(t, index, res.OfferedPerSec*res.WarmupSeconds, "a warm-up message: %s", line)
		require.False(t, seen[index], "listed twice: %s", line)
		seen[index] = true
		require.GreaterOrEqual(t, committed, last, "in commit order: %s", line)
		last = committed
		require.GreaterOrEqual(t, micros, int64(0), line)
		latencies = append(latencies, time.Duration(micros)*time.Microsecond)
	}
	slices.Sort(latencies)
	// The file holds whole microseconds and the result hundredths of a
	// millisecond, each rounded: one step of the latter apart at most.
	require.InDelta(t, res.CommitP99Ms, benchMillis(latencies.percentile(0.99)), 0.0101)
}

// The windows that hold the slowest messages: one per window of commit
// times, however many messages it holds; messages under the bound count
// nowhere.
func TestSlowWindowsCountsWindowsNotMessages(t *testing.T) {
	t.Parallel()
	base := time.Unix(1_800_000_000, 0)
	at := func(ms int, latency time.Duration) committedLatency {
		return committedLatency{committed: base.Add(time.Duration(ms) * time.Millisecond), latency: latency}
	}
	ls := []committedLatency{
		at(0, time.Millisecond), at(10, 40*time.Millisecond), at(20, 50*time.Millisecond), at(99, 30*time.Millisecond),
		at(150, 2*time.Millisecond), at(420, 35*time.Millisecond), at(430, 29*time.Millisecond),
	}
	require.Equal(t, 2, slowWindows(ls, 30*time.Millisecond, stallWindow))
	require.Equal(t, 1, slowWindows(ls, 40*time.Millisecond, stallWindow))
	require.Equal(t, 3, slowWindows(ls, 30*time.Millisecond, 50*time.Millisecond))
	require.Zero(t, slowWindows(ls, time.Second, stallWindow))
	require.Zero(t, slowWindows(nil, time.Millisecond, stallWindow))
}

// deliveredSince reads only its range of messages: the warm-up's stay out
// of the timed figures, and the timed ones out of the warm-up's.
func TestDeliveredSinceReadsOnlyItsRange(t *testing.T) {
	t.Parallel()
	base := time.Now()
	r := &deliveryRecorder{deliveredAt: make([]atomic.Int64, 4)}
	at := make([]time.Time, 4)
	for i := range at {
		at[i] = base
		r.deliveredAt[i].Store(base.Add(time.Duration(i+1) * time.Millisecond).UnixNano())
	}
	require.Equal(t, durations{time.Millisecond, 2 * time.Millisecond}, r.deliveredSince(at, 0, 2))
	require.Equal(t, durations{3 * time.Millisecond, 4 * time.Millisecond}, r.deliveredSince(at, 2, 4))
	// A delivery that came before its commit was read counts as 0; a
	// message not delivered, not at all.
	at[3] = base.Add(time.Second)
	r.deliveredAt[2].Store(0)
	require.Equal(t, durations{0}, r.deliveredSince(at, 2, 4))
}

// requireNoBenchRows checks that an in-place bench removed everything it
// wrote.
func requireNoBenchRows(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, table := range []string{"outbox", "outbox_attempts", "outbox_aggregates", "outbox_stretches", "destinations", "dispatchers", "delivery_stats"} {
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM switchyard."+table).Scan(&n))
		require.Zero(t, n, "rows left in switchyard.%s", table)
	}
}

// In place, an outbox that already holds messages is refused and left as
// it was.
func TestBenchDispatchRefusesBusyOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, upsertBenchDestination(ctx, pool, benchDestinationRow("app", 16)))
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := outbox.Enqueue(ctx, tx, outbox.Message{Topic: "t", Destination: "app", Payload: []byte(`{}`)})
		return err
	}))
	_, err = runBench(t, Config{Database: postgres.Config{URL: url}}, "dispatch", "--messages", "10")
	require.ErrorContains(t, err, "already holds outbox messages")
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM switchyard.outbox").Scan(&n))
	require.Equal(t, 1, n)
}

// Against the embedded default the bench creates a database of its own on
// the server, reports the server's real settings, and drops the database.
func TestBenchDispatchEmbeddedCreatesAndDropsItsDatabase(t *testing.T) {
	t.Parallel()
	data := filepath.Join(dataParent(t), "data")
	res, err := runBench(t, Config{Database: postgres.Config{DataDir: data}}, "dispatch", "--messages", "500", "--aggregates", "10", "--workers", "2")
	require.NoError(t, err)
	require.Equal(t, "created", res.Database)
	require.True(t, res.Settings.Embedded)
	require.Equal(t, "on", res.Settings.Fsync, "the embedded default keeps fsync on")
	require.Equal(t, 500, res.Messages)

	ctx := context.Background()
	cluster, err := pgembed.Start(ctx, pgembed.Config{DataDir: filepath.Join(data, "pg")})
	require.NoError(t, err)
	defer func() { require.NoError(t, cluster.Stop()) }()
	conn, err := pgx.Connect(ctx, cluster.DSN())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var left int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname LIKE 'switchyard\_bench\_%'`).Scan(&left))
	require.Zero(t, left, "the bench database was dropped")
	var migrated bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT to_regclass('switchyard.outbox') IS NOT NULL`).Scan(&migrated))
	require.False(t, migrated, "the bench migrated only its own database, not the console's")
}

func TestBenchCommandRejectsBadArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		nil,
		{"enqueue"},
		{"dispatch", "--destination", "smtp"},
		{"dispatch", "--workers", "0"},
		{"dispatch", "--rate", "100", "--seconds", "0"},
		{"dispatch", "--rate", "100", "--wake", "shout"},
		{"dispatch", "--rate", "100", "--warmup-seconds", "-1"},
		{"dispatch", "--messages", "100", "--warmup-seconds", "1"},
		{"dispatch", "--messages", "100", "--http-floor"},
		{"dispatch", "--messages", "100", "--latency-out", "latencies.csv"},
		{"dispatch", "--rate", "100", "--destination", "http", "--http-floor"},
		{"dispatch", "extra"},
		{"dispatch", "--retained", "-1"},
		{"dispatch", "--no-such-flag"},
	} {
		_, err := runBench(t, Config{Database: postgres.Config{URL: "postgres://127.0.0.1:1/none"}}, args...)
		require.Error(t, err, "%q", args)
		require.NotContains(t, err.Error(), "cannot reach the database", "%q is refused before connecting", args)
	}
}

func TestBenchCommandHelp(t *testing.T) {
	t.Parallel()
	cfg := Config{}
	var out bytes.Buffer
	require.NoError(t, Run(context.Background(), cfg, []string{"dispatch", "-h"}, slog.New(slog.DiscardHandler), &out))
	require.Contains(t, out.String(), "--messages")
	require.Contains(t, out.String(), "--rate")
}

// TestBenchDispatchReal runs the real benchmark when SWITCHYARD_BENCH=1:
// on DATABASE_URL if set, else the embedded default (fsync on) in
// SWITCHYARD_BENCH_DATA (default: a new temporary directory), with the
// bench flags in SWITCHYARD_BENCH_ARGS.
// The JSON line is logged and appended to SWITCHYARD_BENCH_OUT if set.
//
//	SWITCHYARD_BENCH=1 SWITCHYARD_BENCH_ARGS="--destination http" \
//	    go test -run TestBenchDispatchReal -v -timeout 30m ./internal/bench
func TestBenchDispatchReal(t *testing.T) {
	if os.Getenv("SWITCHYARD_BENCH") != "1" {
		t.Skip("set SWITCHYARD_BENCH=1 to run the real benchmark")
	}
	cfg := Config{Database: postgres.Config{URL: os.Getenv("DATABASE_URL")}}
	if cfg.Database.URL == "" {
		cfg.Database.DataDir = os.Getenv("SWITCHYARD_BENCH_DATA")
		if cfg.Database.DataDir == "" {
			cfg.Database.DataDir = filepath.Join(dataParent(t), "data")
		}
	}
	args := append([]string{"dispatch"}, strings.Fields(os.Getenv("SWITCHYARD_BENCH_ARGS"))...)
	res, err := runBench(t, cfg, args...)
	require.NoError(t, err)
	line, err := json.Marshal(res)
	require.NoError(t, err)
	if path := os.Getenv("SWITCHYARD_BENCH_OUT"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		_, err = f.Write(append(line, '\n'))
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
}
