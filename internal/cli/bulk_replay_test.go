package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testwait"
)

// seedDead writes n dead messages with fingerprint fp, a tenth of them the
// blocking dead head of an aggregate of their own, and their group, as the
// dispatcher leaves them.
func seedDead(t *testing.T, pool *pgxpool.Pool, fp string, n int) {
	t.Helper()
	for _, stmt := range []string{
		`INSERT INTO switchyard.destinations (name, kind) VALUES ('billing', 'function') ON CONFLICT DO NOTHING`,
		`INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload, state, last_error, error_fingerprint, finished_at)
		SELECT 'order.created', 'billing', CASE WHEN g % 10 = 0 THEN 'order' ELSE '' END,
			CASE WHEN g % 10 = 0 THEN @fp || g ELSE '' END, jsonb_build_object('n', g), 'dead', 'HTTP 422', @fp, now()
		FROM generate_series(1, @n::int) g`,
		`INSERT INTO switchyard.outbox_blocked_aggregates (destination, aggregate_type, aggregate_id, dead_message_id)
		SELECT destination, aggregate_type, aggregate_id, id FROM switchyard.outbox WHERE aggregate_id LIKE @fp || '%'`,
		`UPDATE switchyard.outbox_aggregates SET done_seq = last_seq, due_at = 'infinity' WHERE aggregate_id LIKE @fp || '%'`,
		`INSERT INTO switchyard.dead_letter_groups (fingerprint, dead, first_dead_at, last_dead_at, sample_id)
		SELECT @fp, @n::int, now(), now(), max(id) FROM switchyard.outbox WHERE error_fingerprint = @fp`,
		`ANALYZE switchyard.outbox`,
	} {
		_, err := pool.Exec(context.Background(), stmt, pgx.NamedArgs{"fp": fp, "n": n})
		require.NoError(t, err, stmt)
	}
}

// consoleAPI calls a console's JSON API as a script would (demo mode signs
// it in as the demo admin) and decodes the job it answers with. An action
// (body set) carries a new request id, in the body and as its
// Idempotency-Key.
func consoleAPI(t *testing.T, p *consoletest.Process, method, path string, body map[string]any) console.JobView {
	t.Helper()
	var raw []byte
	key := uuid.NewString()
	if body != nil {
		body["request_id"] = key
		var err error
		raw, err = json.Marshal(body)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, p.URL+path, bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if body != nil {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out bytes.Buffer
	_, err = out.ReadFrom(resp.Body)
	require.NoError(t, err)
	require.Less(t, resp.StatusCode, 300, "%s %s: %s", method, path, out.String())
	var job console.JobView
	require.NoError(t, json.Unmarshal(out.Bytes(), &job), out.String())
	return job
}

func startJob(t *testing.T, p *consoletest.Process, fp string, rate int) console.JobView {
	t.Helper()
	return consoleAPI(t, p, http.MethodPost, "/api/replay-jobs", map[string]any{
		"filter": map[string]string{"fingerprint": fp}, "mode": "redeliver", "rate_per_second": rate})
}

// waitProgress polls the job through p's API until done(job), and returns
// the job and every distinct progress it saw on the way.
func waitProgress(t *testing.T, p *consoletest.Process, id uuid.UUID, what string, done func(console.JobView) bool) (console.JobView, []int64) {
	t.Helper()
	var seen []int64
	var job console.JobView
	// 50,000 replays at 5,000/s take 10 s on an idle machine; a CI run
	// shares the 2 cores with the browser suite and other packages. Every
	// 50 ms: each check is a request through the console and a query, and
	// the job's progress moves by a batch (500) at a time, every 100 ms
	// at 5,000/s: checking more often saw nothing new and, over a minute
	// on a loaded machine, cost thousands of requests.
	testwait.UntilEvery(t, 3*time.Minute, 50*time.Millisecond, what+" (the console's log is above)", func() bool {
		job = consoleAPI(t, p, http.MethodGet, "/api/replay-jobs/"+id.String(), nil)
		if len(seen) == 0 || seen[len(seen)-1] != job.Replayed {
			seen = append(seen, job.Replayed)
		}
		return done(job)
	})
	return job, seen
}

func sqlCount(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

// The bulk replay proof, through the console's JSON API on real
// console processes: 50,000 dead messages are each replayed exactly once,
// the job's progress is visible while it runs, a console killed (kill -9)
// mid-job leaves the job to another console, which resumes it once the
// lease expires without replaying anything twice, and a cancel stops a job.
func TestBulkReplayOf50000ThroughTheConsole(t *testing.T) {
	t.Parallel()
	const messages = 50000
	ctx := context.Background()
	url := dbtest.NewURL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	seedDead(t, pool, "bulk", messages)
	seedDead(t, pool, "other", 3000)
	seedDead(t, pool, "last", 10)
	// No dispatcher: the replays stay pending, so the counts below are the
	// job's alone.
	env := []string{"DATABASE_URL=" + url, "SWITCHYARD_LEASE=2s", "SWITCHYARD_WORKERS=0"}

	first := serveConsole(t, env)
	job := startJob(t, first, "bulk", 5000)
	job, seen := waitProgress(t, first, job.ID, "a fifth replayed", func(j console.JobView) bool { return j.Replayed >= messages/5 })
	require.Equal(t, "running", job.State)
	first.Signal(t, syscall.SIGKILL)
	require.Equal(t, -1, first.WaitExit(t, 10*time.Second))
	killedAt := sqlCount(t, pool, `SELECT replayed FROM switchyard.replay_jobs WHERE id = $1`, job.ID)
	require.Less(t, killedAt, int64(messages), "killed mid-job")
	require.Equal(t, killedAt, sqlCount(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of IS NOT NULL`),
		"what the job counted is what committed")

	second := serveConsole(t, env)
	job, more := waitProgress(t, second, job.ID, "the job done", func(j console.JobView) bool { return j.State == "done" })
	seen = append(seen, more...)
	require.Equal(t, int64(messages), job.Replayed)
	require.Zero(t, job.Skipped)
	require.Equal(t, int64(messages), sqlCount(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE replay_of IS NOT NULL`))
	require.Equal(t, int64(messages), sqlCount(t, pool, `SELECT count(DISTINCT replay_of) FROM switchyard.outbox WHERE replay_of IS NOT NULL`),
		"no message replayed twice")
	require.Equal(t, int64(messages), sqlCount(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE error_fingerprint = 'bulk' AND replays = 1`))
	require.Zero(t, sqlCount(t, pool, `SELECT count(*) FROM switchyard.outbox_blocked_aggregates WHERE aggregate_id LIKE 'bulk%'`))
	require.Zero(t, sqlCount(t, pool, `SELECT dead FROM switchyard.dead_letter_groups WHERE fingerprint = 'bulk'`))
	var live int
	for _, n := range seen {
		if n > 0 && n < messages {
			live++
		}
	}
	require.GreaterOrEqual(t, live, 5, "progress was visible while the job ran: %v", seen)

	// Cancel: the job stops; what it replayed stays, nothing more comes.
	other := startJob(t, second, "other", 500)
	waitProgress(t, second, other.ID, "some progress", func(j console.JobView) bool { return j.Replayed > 0 })
	other = consoleAPI(t, second, http.MethodPost, "/api/replay-jobs/"+other.ID.String()+"/cancel", map[string]any{})
	require.Equal(t, "cancelled", other.State)
	// The runner takes one job at a time: once a job started after the
	// cancel is done, it has left the cancelled one.
	last := startJob(t, second, "last", 100)
	waitProgress(t, second, last.ID, "the next job done", func(j console.JobView) bool { return j.State == "done" })
	other = consoleAPI(t, second, http.MethodGet, "/api/replay-jobs/"+other.ID.String(), nil)
	require.Equal(t, "cancelled", other.State)
	require.Less(t, other.Replayed, int64(3000))
	require.Equal(t, other.Replayed, sqlCount(t, pool, `SELECT count(*) FROM switchyard.outbox r
		JOIN switchyard.outbox o ON o.id = r.replay_of WHERE o.error_fingerprint = 'other'`), "nothing replayed after the cancel")
}
