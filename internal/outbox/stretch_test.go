package outbox

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/testlog"
)

// stretchRow is a stretch as the database holds it.
type stretchRow struct {
	id          int64
	destination string
	owner       string
	ids         []int64
}

// stretchesOf reads the stretches, by destination: the ids of all of a
// destination's (a claim of several statements may make several), the
// owner and id of the last one read.
func stretchesOf(t *testing.T, d *Dispatcher) map[string]stretchRow {
	t.Helper()
	rows, err := d.pool.Query(context.Background(), `SELECT id, destination, owner, ids FROM switchyard.outbox_stretches`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]stretchRow{}
	for rows.Next() {
		var s stretchRow
		require.NoError(t, rows.Scan(&s.id, &s.destination, &s.owner, &s.ids))
		s.ids = append(s.ids, out[s.destination].ids...)
		slices.Sort(s.ids)
		out[s.destination] = s
	}
	require.NoError(t, rows.Err())
	return out
}

// idsOf lists the ids of groups' messages of destination, sorted.
func idsOf(groups []group, destination string) []int64 {
	var ids []int64
	for _, g := range groups {
		for _, m := range g.msgs {
			if m.Destination == destination {
				ids = append(ids, m.ID)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// A claim of first tries writes none of their rows, not even a row lock:
// it inserts one stretch per destination, whose ids keep the next claims
// off them. Each message's attempt is counted at its finalize, and the
// finalize of a stretch's last messages deletes it.
func TestAFirstTryClaimWritesNoMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha", "beta")
	for range 30 {
		enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)},
			Message{Topic: "t", Destination: "beta", Payload: []byte(`{}`)})
	}
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), BatchSize: 100, LeaseDuration: time.Hour, Routes: map[string]Route{
		"alpha": {Destination: destination.Func(nil)}, "beta": {Destination: destination.Func(nil)}}})
	before := rowVersions(t, d)
	groups, err := d.claim(ctx, "w", 100, nil)
	require.NoError(t, err)
	require.Len(t, groups, 60)
	require.Equal(t, before, rowVersions(t, d), "no message row written or locked by the claim")
	stretches := stretchesOf(t, d)
	require.Len(t, stretches, 2, "stretches of both destinations")
	for _, name := range []string{"alpha", "beta"} {
		require.Equal(t, "w", stretches[name].owner)
		require.Equal(t, idsOf(groups, name), stretches[name].ids, "%s's stretch holds the ids it leased", name)
	}
	for _, g := range groups {
		m := g.msgs[0]
		require.False(t, m.Counted, "a first try's attempt is counted at its finalize")
		require.Equal(t, int32(1), m.Attempts, "the attempt it would be")
		require.NotZero(t, m.Stretch)
	}
	var rows, owners int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT (destination, owner)) FROM switchyard.outbox_stretches`).Scan(&rows, &owners))
	require.Equal(t, 2, owners)
	require.LessOrEqual(t, rows, 4, "at most one per destination and statement of the claim: %d", rows)
	again, err := d.claim(ctx, "other", 100, nil)
	require.NoError(t, err)
	require.Empty(t, again, "a stretch's messages are not claimable")

	now := time.Now()
	var alpha, beta []result
	for _, g := range groups {
		r := result{msg: g.msgs[0], outcome: outcomeDelivered, started: now, finished: now}
		if r.msg.Destination == "alpha" {
			alpha = append(alpha, r)
		} else {
			beta = append(beta, r)
		}
	}
	_, _, err = d.finalize(ctx, "w", append(alpha, beta[:10]...))
	require.NoError(t, err)
	stretches = stretchesOf(t, d)
	require.NotContains(t, stretches, "alpha", "deleted with its last messages")
	require.Contains(t, stretches, "beta", "20 of its messages still in flight")
	_, _, err = d.finalize(ctx, "w", beta[10:])
	require.NoError(t, err)
	require.Empty(t, stretchesOf(t, d))
	require.Equal(t, 60, countWhere(t, pool, "state = 'delivered' AND attempts = 1 AND delivered_by = 'w'"), "each attempt counted once")
}

// rowVersions is, for every outbox row in id order, the transactions
// that wrote it and last locked or updated it: a claim that writes a row,
// or locks it, changes them.
func rowVersions(t *testing.T, d *Dispatcher) []string {
	t.Helper()
	var versions []string
	require.NoError(t, d.pool.QueryRow(context.Background(),
		`SELECT array_agg(xmin::text || ':' || xmax::text ORDER BY id) FROM switchyard.outbox`).Scan(&versions))
	return versions
}

// A stretch whose lease ran out (its dispatcher died, or lost the
// database) is taken over by the next claim: its messages become retries,
// each counted the attempt its dispatcher may have made and given a new
// lease version, leased at once where the claim has room and found by
// the next claim otherwise. The heartbeat extends a stretch while it
// lives and finds it gone after that, and the first dispatcher's finalize
// is stale: it changes nothing.
func TestAnExpiredStretchIsTakenOverFencedAndCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	for range 3 {
		enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)})
	}
	var clock atomic.Int64
	clock.Store(time.Now().Add(time.Second).UnixNano()) // the messages are due
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), LeaseDuration: 10 * time.Second,
		Clock:  func() time.Time { return time.Unix(0, clock.Load()) },
		Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	a, err := d.claim(ctx, "A", 10, nil)
	require.NoError(t, err)
	require.Len(t, a, 3)
	stretch := a[0].msgs[0].Stretch
	require.NotZero(t, stretch)
	heartbeat := func() []int64 {
		t.Helper()
		ids, err := queries.New(pool).OutboxExtendStretches(ctx, queries.OutboxExtendStretchesParams{
			Now: d.now(), LeaseSeconds: 10, Ids: []int64{stretch}})
		require.NoError(t, err)
		return ids
	}
	clock.Add(int64(9 * time.Second))
	require.Equal(t, []int64{stretch}, heartbeat(), "the heartbeat extends a live stretch")
	clock.Add(int64(9 * time.Second))
	none, err := d.claim(ctx, "B", 10, nil)
	require.NoError(t, err)
	require.Empty(t, none, "extended: still A's")

	clock.Add(int64(11 * time.Second))
	b, _, err := d.claimPaced(ctx, claimRequest{worker: "B", limit: 2, held: map[string]int{}})
	require.NoError(t, err)
	require.Len(t, b, 2, "as many as B has room for")
	require.Empty(t, stretchesOf(t, d), "the expired stretch deleted")
	require.Empty(t, heartbeat(), "A's heartbeat finds its stretch gone")
	for _, g := range b {
		m := g.msgs[0]
		require.Zero(t, m.Stretch, "a retry, leased on its own row")
		require.True(t, m.Counted)
		require.Equal(t, int32(2), m.Attempts, "A's attempt and B's")
		require.Greater(t, m.LeaseVersion, a[0].msgs[0].LeaseVersion, "fenced: A's lease is stale")
	}
	require.Equal(t, 1, countWhere(t, pool, "lease_owner IS NULL AND attempts = 1 AND lease_version = 1"),
		"the third: A's attempt counted, fenced, left for the next claim")

	now := time.Now()
	var stale []result
	for _, g := range a {
		stale = append(stale, result{msg: g.msgs[0], outcome: outcomeDelivered, started: now, finished: now})
	}
	_, _, err = d.finalize(ctx, "A", stale)
	require.NoError(t, err)
	require.Zero(t, countWhere(t, pool, "state <> 'pending'"), "A's finalize is stale: it changed nothing")

	c, err := d.claim(ctx, "C", 10, nil)
	require.NoError(t, err)
	require.Len(t, c, 1)
	require.Equal(t, int32(2), c[0].msgs[0].Attempts)
	var results []result
	for _, g := range append(b, c...) {
		results = append(results, result{msg: g.msgs[0], outcome: outcomeDelivered, started: now, finished: now})
	}
	_, _, err = d.finalize(ctx, "B", results)
	require.NoError(t, err)
	require.Equal(t, 3, countWhere(t, pool, "state = 'delivered' AND attempts = 2"))
}

// A claim's first tries that it will not deliver (its excess) leave their
// stretch, their rows untouched, and are claimable again at once; a
// stretch left with none is deleted.
func TestAClaimsExcessFirstTriesLeaveTheirStretch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	for range 5 {
		enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)})
	}
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), LeaseDuration: time.Hour,
		Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	groups, err := d.claim(ctx, "w", 10, nil)
	require.NoError(t, err)
	require.Len(t, groups, 5)
	var msgs []claimedMessage
	for _, g := range groups {
		msgs = append(msgs, g.msgs[0])
	}
	before := rowVersions(t, d)
	d.releaseStretched(ctx, "w", msgs[:2])
	require.Equal(t, before, rowVersions(t, d), "their rows untouched")
	require.Len(t, stretchesOf(t, d)["alpha"].ids, 3)
	again, err := d.claim(ctx, "other", 10, nil)
	require.NoError(t, err)
	require.Equal(t, idsOf(groups[:2], "alpha"), idsOf(again, "alpha"), "claimable again at once")
	d.releaseStretched(ctx, "w", msgs[2:])
	require.Len(t, stretchesOf(t, d), 1, "w's stretch deleted with its last messages; other's is there")
}

// Unordered claims of many dispatchers at once, each on connections of its
// own, never lease one message twice: a claim writes none of the first
// tries it leases, so claims of a destination take turns under its
// advisory lock (OutboxClaimTurn), each reading after the last one's
// stretch committed. Both ways a claim is sent: planned for its
// arguments, in a transaction, and prepared, in one pipeline.
func TestUnorderedClaimsOfManyDispatchersNeverLeaseAMessageTwice(t *testing.T) {
	t.Parallel()
	for _, prepared := range []bool{false, true} {
		t.Run(fmt.Sprintf("prepared=%v", prepared), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := setup(t, "alpha", "beta")
			messages := 600
			if prepared {
				messages = planStatisticsFloor
			}
			var msgs []Message
			for i := range messages {
				msgs = append(msgs, Message{Topic: "t", Destination: []string{"alpha", "beta"}[i%2], Payload: []byte(`{}`)})
			}
			enqueue(t, pool, msgs...)
			if prepared {
				describeForPreparedClaims(t, pool)
			}
			const dispatchers = 8
			start := make(chan struct{})
			var wg sync.WaitGroup
			var mu sync.Mutex
			leased := map[int64]int{}
			for i := range dispatchers {
				d := newDispatcher(t, pool, Config{Logger: testlog.New(t), LeaseDuration: time.Hour, Routes: map[string]Route{
					"alpha": {Destination: destination.Func(nil)}, "beta": {Destination: destination.Func(nil)}}})
				d.heartbeat(ctx)
				want := claimPlanned
				if prepared {
					want = claimPrepared
				}
				require.Equal(t, want, d.claimModeNow())
				wg.Go(func() {
					<-start
					for {
						groups, _, err := d.claimPaced(ctx, claimRequest{worker: fmt.Sprint("d", i), limit: 10,
							sizes: map[string]int{"alpha": 4, "beta": 4}})
						if err != nil {
							t.Error(err)
							return
						}
						if len(groups) == 0 {
							return
						}
						mu.Lock()
						for _, g := range groups {
							for _, m := range g.msgs {
								leased[m.ID]++
							}
						}
						mu.Unlock()
					}
				})
			}
			close(start)
			wg.Wait()
			require.Len(t, leased, messages, "every message leased")
			for id, n := range leased {
				require.Equal(t, 1, n, "message %d leased more than once", id)
			}
			var inStretches int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox_stretches s, unnest(s.ids)`).Scan(&inStretches))
			require.Equal(t, messages, inStretches, "each in one stretch")
		})
	}
}
