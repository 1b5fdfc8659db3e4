package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is the job River drains: it carries a payload of about the
// size of the console bench's messages (~70 bytes of JSON).
type noopArgs struct {
	Seq     int    `json:"seq"`
	Payload string `json:"payload"`
}

func (noopArgs) Kind() string { return "peers_noop" }

// noopWorker does nothing but count; done is closed at want.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	worked *atomic.Int64
	want   int64
	done   chan struct{}
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	if w.worked.Add(1) == w.want {
		close(w.done)
	}
	return nil
}

// riverTarget is River's database: one of its own on the server, migrated
// once, emptied before each drain.
type riverTarget struct {
	admin  *pgxpool.Pool // the configured database, to drop ours at the end
	pool   *pgxpool.Pool // River's database
	name   string
	logger *slog.Logger
}

func openRiverTarget(ctx context.Context, admin *pgxpool.Pool, dsn string, conns int) (*riverTarget, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	t := &riverTarget{admin: admin, name: "river_peers_" + hex.EncodeToString(b),
		logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{t.name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create River's database (the role needs CREATEDB): %w", err)
	}
	riverDSN, err := withDatabase(dsn, t.name)
	if err == nil {
		t.pool, err = connect(ctx, riverDSN, int32(conns))
	}
	if err != nil {
		t.close()
		return nil, err
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(t.pool), &rivermigrate.Config{Logger: t.logger})
	if err == nil {
		_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		t.close()
		return nil, fmt.Errorf("migrate River: %w", err)
	}
	return t, nil
}

// close drops River's database.
func (t *riverTarget) close() {
	if t.pool != nil {
		t.pool.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := t.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{t.name}.Sanitize()+" WITH (FORCE)"); err != nil {
		fmt.Fprintln(os.Stderr, "peers: drop River's database:", err)
	}
}

// drain inserts n jobs (untimed) and times a fresh client with maxWorkers
// until every job has been worked and is completed in the table.
func (t *riverTarget) drain(ctx context.Context, n, maxWorkers int) (runResult, error) {
	if _, err := t.pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return runResult{}, fmt.Errorf("empty river_job: %w", err)
	}
	worker := &noopWorker{worked: &atomic.Int64{}, want: int64(n), done: make(chan struct{})}
	workers := river.NewWorkers()
	river.AddWorker(workers, worker)
	client, err := river.NewClient(riverpgxv5.New(t.pool), &river.Config{
		Logger:  t.logger,
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers: workers,
	})
	if err != nil {
		return runResult{}, fmt.Errorf("new River client: %w", err)
	}
	const batch = 5_000
	params := make([]river.InsertManyParams, 0, batch)
	for i := range n {
		params = append(params, river.InsertManyParams{Args: noopArgs{Seq: i, Payload: "order-placed:0123456789abcdef0123456789"}})
		if len(params) == batch || i == n-1 {
			if _, err := client.InsertManyFast(ctx, params); err != nil {
				return runResult{}, fmt.Errorf("insert jobs: %w", err)
			}
			params = params[:0]
		}
	}
	if _, err := t.pool.Exec(ctx, "ANALYZE river_job"); err != nil {
		return runResult{}, fmt.Errorf("analyze: %w", err)
	}

	cpuStart, err := sampleCPU(ctx, t.pool)
	if err != nil {
		return runResult{}, err
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return runResult{}, fmt.Errorf("start River: %w", err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	}()
	select {
	case <-worker.done:
	case <-ctx.Done():
		return runResult{}, ctx.Err()
	}
	// River completes jobs in batches after they are worked: the drain ends
	// when the table says so.
	for {
		var left int
		if err := t.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state <> 'completed'").Scan(&left); err != nil {
			return runResult{}, fmt.Errorf("count uncompleted jobs: %w", err)
		}
		if left == 0 {
			break
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return runResult{}, ctx.Err()
		}
	}
	elapsed := time.Since(start)
	cpuEnd, err := sampleCPU(ctx, t.pool)
	if err != nil {
		return runResult{}, err
	}
	var completed int
	if err := t.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&completed); err != nil {
		return runResult{}, fmt.Errorf("count completed jobs: %w", err)
	}
	if completed != n || worker.worked.Load() != int64(n) {
		return runResult{}, fmt.Errorf("%d jobs completed and %d worked, want %d each", completed, worker.worked.Load(), n)
	}
	cpu, err := json.Marshal(cpuSince(cpuStart, cpuEnd, n))
	if err != nil {
		return runResult{}, err
	}
	return runResult{MessagesPerSec: float64(int64(float64(n)/elapsed.Seconds() + 0.5)),
		Seconds: round3(elapsed.Seconds()), CPU: cpu}, nil
}

// riverVersion is the River module this binary was built with.
func riverVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "github.com/riverqueue/river" {
				return m.Version
			}
		}
	}
	return "unknown"
}
