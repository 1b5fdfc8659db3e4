package bulkreplay

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/msgfilter"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
)

// edge is one message of the prefix-and-window test: just inside or just
// outside a bound of the filter.
type edge struct {
	topic, dest string
	created     time.Duration // after the window's start
	state       string
	replays     int
	lastError   string
	in          bool
}

// window is the test's created_at window: [windowStart, windowStart+1h).
var windowStart = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)

var edges = []edge{
	{"order.created", "hook.a", 0, "dead", 0, "HTTP 500: Rejected", true}, // on the from bound
	{"order.shipped", "hook.b", time.Hour - time.Microsecond, "dead", 0, "HTTP 500: rejected", true},
	{"order.created", "hook.a", -time.Microsecond, "dead", 0, "HTTP 500: rejected", false}, // before from
	{"order.created", "hook.a", time.Hour, "dead", 0, "HTTP 500: rejected", false},         // on the to bound
	{"order", "hook.a", time.Minute, "dead", 0, "HTTP 500: rejected", false},               // the prefix without its dot
	{"orders.created", "hook.a", time.Minute, "dead", 0, "HTTP 500: rejected", false},
	{"order/", "hook.a", time.Minute, "dead", 0, "HTTP 500: rejected", false}, // the prefix's upper bound
	{"order-x", "hook.a", time.Minute, "dead", 0, "HTTP 500: rejected", false},
	{"order.created", "hooks", time.Minute, "dead", 0, "HTTP 500: rejected", false}, // destination outside its prefix
	{"order.created", "hook", time.Minute, "dead", 0, "HTTP 500: rejected", false},
	{"order.created", "hook.a", time.Minute, "dead", 1, "HTTP 500: rejected", false}, // replayed already
	{"order.created", "hook.a", time.Minute, "pending", 0, "HTTP 500: rejected", false},
	{"order.created", "hook.a", time.Minute, "delivered", 0, "HTTP 500: rejected", false},
	{"order.created", "hook.a", time.Minute, "discarded", 0, "HTTP 500: rejected", false},
	{"order.created", "hook.a", time.Minute, "dead", 0, "HTTP 500: timeout", false}, // another error
	{"order.x.y", "hook.b.c", 30 * time.Minute, "dead", 0, "HTTP 502: REJECTED upstream", true},
}

// edgeFilter is the list's filter ?state=dead&topic=order.&destination=hook.*
// &error=rejected&from=...&to=... as a job's.
var edgeFilter = Filter{Topic: "order.", Destination: "hook.*", ErrorContains: "rejected",
	CreatedFrom: windowStart, CreatedTo: windowStart.Add(time.Hour)}

// setupEdges writes edges and returns the ids of those inside the filter.
func setupEdges(t *testing.T) (*pgxpool.Pool, []int64) {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.New(t)
	for _, d := range []string{"hook.a", "hook.b", "hook.b.c", "hooks", "hook"} {
		_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind) VALUES ($1, 'function')`, d)
		require.NoError(t, err)
	}
	var want []int64
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for i, e := range edges {
			if _, err := outbox.Enqueue(ctx, tx, outbox.Message{Topic: e.topic, Destination: e.dest, Payload: fmt.Appendf(nil, `{"n": %d}`, i)}); err != nil {
				return err
			}
			var id int64
			err := tx.QueryRow(ctx, `UPDATE switchyard.outbox SET state = $2, replays = $3, last_error = $4, created_at = $5,
				finished_at = CASE WHEN $2 <> 'pending' THEN $5::timestamptz END
				WHERE (payload->>'n')::int = $1 RETURNING id`, i, e.state, e.replays, e.lastError, windowStart.Add(e.created)).Scan(&id)
			if err != nil {
				return err
			}
			if e.in {
				want = append(want, id)
			}
		}
		return nil
	}))
	return pool, want
}

// listed is what the message list shows for the same filter, through its
// own query (ConsoleMessagesListOlder) and the shared name parsing.
func listed(t *testing.T, pool *pgxpool.Pool, f Filter) []int64 {
	t.Helper()
	topic, err := msgfilter.ParseName(f.Topic)
	require.NoError(t, err)
	dest, err := msgfilter.ParseName(f.Destination)
	require.NoError(t, err)
	dead := "dead"
	rows, err := queries.New(pool).ConsoleMessagesListOlder(context.Background(), queries.ConsoleMessagesListOlderParams{
		State: &dead, Topic: topic.Exact, TopicPrefix: topic.Prefix, TopicUpper: topic.Upper,
		Destination: dest.Exact, DestinationPrefix: dest.Prefix, DestinationUpper: dest.Upper,
		ErrorText: msgfilter.ErrorPattern(f.ErrorContains), CreatedFrom: optTime(f.CreatedFrom), CreatedTo: optTime(f.CreatedTo),
		Floor: 0, Ceiling: 1<<63 - 1, Cursor: 1<<63 - 1, MaxRows: 1000,
	})
	require.NoError(t, err)
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	slices.Sort(ids)
	return ids
}

// A job of a topic prefix, a destination prefix, an error and a created_at
// window estimates and replays exactly the messages the message list shows
// for the same filter: none of those just outside a bound.
func TestJobSelectsExactlyTheListsMessages(t *testing.T) {
	t.Parallel()
	pool, want := setupEdges(t)
	require.Equal(t, want, listed(t, pool, edgeFilter), "the list shows the messages inside every bound")

	estimate, err := Estimate(context.Background(), pool, edgeFilter)
	require.NoError(t, err)
	require.Equal(t, Matches{N: int64(len(want))}, estimate)
	job, err := start(t, pool, Spec{Filter: edgeFilter, Mode: outbox.Redeliver, Actor: "ann", RatePerSecond: 1000, Estimate: estimate.N})
	require.NoError(t, err)
	runner(t, pool, Config{BatchSize: 2, Poll: 10 * time.Millisecond})
	job = waitJob(t, pool, job, "the job done", func(j Job) bool { return j.State == "done" })
	require.Equal(t, int64(len(want)), job.Replayed)

	var replayed []int64
	rows, err := pool.Query(context.Background(), `SELECT replay_of FROM switchyard.outbox WHERE replay_job = $1 ORDER BY replay_of`, job.ID)
	require.NoError(t, err)
	replayed, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Equal(t, want, replayed)
}

// Two spellings of one prefix are one filter: one running job.
func TestPrefixSpellingsAreOneFilter(t *testing.T) {
	t.Parallel()
	pool, _ := setupEdges(t)
	first, err := start(t, pool, Spec{Filter: Filter{Topic: "order."}, Mode: outbox.Redeliver, Actor: "ann"})
	require.NoError(t, err)
	require.JSONEq(t, `{"topic": "order.*"}`, string(first.Filter))
	again, err := start(t, pool, Spec{Filter: Filter{Topic: "order.*"}, Mode: outbox.Redeliver, Actor: "bob"})
	require.ErrorIs(t, err, ErrAlreadyRunning)
	require.Equal(t, first.ID, again.ID)
	_, err = Estimate(context.Background(), pool, Filter{Topic: "x\U0010FFFF*"})
	require.ErrorIs(t, err, msgfilter.ErrNoUpperBound)
}
