package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/backoff"
	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/destination/guard"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/testlog"
	"github.com/switchyard/switchyard/internal/testwait"
)

func fastRetry(maxAttempts int) backoff.Policy {
	return backoff.Policy{Base: time.Millisecond, Cap: 20 * time.Millisecond, MaxAttempts: maxAttempts}
}

func startDispatcher(t *testing.T, pool *pgxpool.Pool, cfg Config) *Dispatcher {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testlog.New(t)
	}
	d := newDispatcher(t, pool, cfg)
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(d.Stop)
	return d
}

// Invariant 2, deterministic: A's lease expires on the injected clock, B
// claims the message, A's finalize changes nothing, B's applies.
func TestFencingStaleFinalizeChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)})
	var clock atomic.Int64
	clock.Store(time.Now().Add(time.Second).UnixNano()) // the message is due
	d := newDispatcher(t, pool, Config{
		LeaseDuration: 10 * time.Second,
		Clock:         func() time.Time { return time.Unix(0, clock.Load()) },
		Routes:        map[string]Route{"alpha": {Destination: destination.Func(nil)}},
	})

	a := claimOne(t, d, "A")
	none, err := d.claim(ctx, "B", 10, nil)
	require.NoError(t, err)
	require.Empty(t, none, "a leased message is not claimable")

	clock.Add(int64(11 * time.Second))
	b := claimOne(t, d, "B")
	require.Equal(t, a.ID, b.ID, "an expired lease is claimable again")
	require.Equal(t, a.LeaseVersion+1, b.LeaseVersion)
	require.Equal(t, a.MessageID, b.MessageID, "the same idempotency key")

	now := time.Now()
	_, _, err = d.finalize(ctx, "A", []result{{msg: a, outcome: outcomeDead, err: "A gave up", started: now, finished: now}})
	require.NoError(t, err)
	require.Equal(t, 1, countWhere(t, pool, "state = 'pending' AND lease_version = $1", b.LeaseVersion), "A's stale finalize changed nothing")

	_, _, err = d.finalize(ctx, "B", []result{{msg: b, outcome: outcomeDelivered, started: now, finished: now}})
	require.NoError(t, err)
	require.Equal(t, 1, countWhere(t, pool, "state = 'delivered' AND last_error IS NULL"))
	var applied, stale int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE applied), count(*) FILTER (WHERE NOT applied) FROM switchyard.outbox_attempt_log`).Scan(&applied, &stale))
	require.Equal(t, 1, applied)
	require.Equal(t, 1, stale, "the fenced attempt is recorded too")

	// The attempt that delivered it is on the message's row, the fenced one
	// in outbox_attempts; the log shows both.
	var worker, outcome string
	var leaseVersion int64
	var attempt int32
	require.NoError(t, pool.QueryRow(ctx, `SELECT worker, outcome, lease_version, attempt FROM switchyard.outbox_attempts`).Scan(&worker, &outcome, &leaseVersion, &attempt))
	require.Equal(t, []any{"A", "dead", a.LeaseVersion, a.Attempts}, []any{worker, outcome, leaseVersion, attempt})
	require.NoError(t, pool.QueryRow(ctx, `SELECT delivered_by, lease_version, attempts FROM switchyard.outbox`).Scan(&worker, &leaseVersion, &attempt))
	require.Equal(t, []any{"B", b.LeaseVersion, b.Attempts}, []any{worker, leaseVersion, attempt})
	log, err := queries.New(pool).ConsoleMessageAttemptList(ctx, queries.ConsoleMessageAttemptListParams{MessageID: b.ID, MaxRows: 10})
	require.NoError(t, err)
	require.Len(t, log, 2)
	require.Equal(t, []any{"A", "dead", false}, []any{log[0].Worker, log[0].Outcome, log[0].Applied}, "oldest first")
	require.Equal(t, []any{"B", "delivered", true, b.LeaseVersion, b.Attempts}, []any{log[1].Worker, log[1].Outcome, log[1].Applied, log[1].LeaseVersion, log[1].Attempt})
	require.WithinDuration(t, now, log[1].StartedAt, time.Millisecond)
	require.WithinDuration(t, now, log[1].FinishedAt, time.Millisecond)
}

// The unordered claim and its heartbeat change no indexed column of the
// message, and the outbox's pages keep room for a new version of each of
// their rows, so PostgreSQL writes a claimed row's new version on its page
// without an entry in each index (a HOT update:
// migrations/00024_outbox_unordered_lease.sql). A claim that moves
// next_attempt_at again, an index on a column the claim or the heartbeat
// writes, or a fillfactor that leaves too little room for a claim of many
// neighbouring rows (130 of these 300 updates were HOT at 70) fails this.
func TestUnorderedClaimAndHeartbeatAreHotUpdates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha", "beta")
	const n = 300 // several pages of them
	// Retries, each leased on its own row (first tries are leased in a
	// stretch, their rows not written: TestAFirstTryClaimWritesNoMessage).
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, attempts)
		SELECT 't', 'alpha', '{"order":"A-1042","status":"paid","amount_cents":12990}', 1 FROM generate_series(1, $1::int)`, n)
	require.NoError(t, err)
	var due time.Time
	var pages int
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(next_attempt_at), count(DISTINCT (ctid::text::point)[0]) FROM switchyard.outbox`).Scan(&due, &pages))
	require.Greater(t, pages, 5)

	claim := func(q *queries.Queries, destination string, most int32) []queries.OutboxClaimUnorderedRow {
		rows, err := q.OutboxClaimUnordered(ctx, queries.OutboxClaimUnorderedParams{
			Owner: "A", LeaseSeconds: 30, Destinations: []string{destination}, Caps: []int32{most}, BatchSize: most})
		require.NoError(t, err)
		return rows
	}
	var claimed []queries.OutboxClaimUnorderedRow
	updated, hot := hotUpdates(t, pool, func(q *queries.Queries) { claimed = claim(q, "alpha", n) })
	require.Len(t, claimed, n)
	require.Equal(t, []int64{n, n}, []int64{updated, hot}, "the claim's row updates, and how many of them were HOT")
	require.Empty(t, claim(queries.New(pool), "alpha", 10), "a leased message is not claimable")

	// The heartbeat, of a message enqueued after that claim: an insert
	// leaves more than half of its page free, room for the versions of its
	// claim and its heartbeat. (The claim filled alpha's pages with a
	// second version of each row; until the first versions are pruned,
	// which any snapshot of the database's can put off, a third may not
	// fit, and then the heartbeat's update is not HOT, however cheap.)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, attempts) VALUES ('t', 'beta', '{}', 1)`)
	require.NoError(t, err)
	beta := claim(queries.New(pool), "beta", 1)
	require.Len(t, beta, 1)
	updated, hot = hotUpdates(t, pool, func(q *queries.Queries) {
		extended, err := q.OutboxExtendLeases(ctx, queries.OutboxExtendLeasesParams{
			LeaseSeconds: 60, Ids: []int64{beta[0].ID}, LeaseVersions: []int64{beta[0].LeaseVersion}})
		require.NoError(t, err)
		require.Len(t, extended, 1)
	})
	require.Equal(t, []int64{1, 1}, []int64{updated, hot}, "the heartbeat's row update, and whether it was HOT")

	var moved int
	var leasedUntil, now time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE next_attempt_at > $1 AND destination = 'alpha'),
		max(leased_until), now() FROM switchyard.outbox`, due).Scan(&moved, &leasedUntil, &now))
	require.Zero(t, moved, "the claim leaves next_attempt_at as it was")
	require.WithinDuration(t, now.Add(time.Minute), leasedUntil, 5*time.Second, "the heartbeat moved the lease's expiry")

	// Released (its lease given back, its lease version unchanged), the
	// message is not leased again by a heartbeat that comes late.
	released := time.Now()
	_, _, err = newDispatcher(t, pool, Config{}).finalize(ctx, "A", []result{{msg: claimedMessage{OutboxClaimUnorderedRow: beta[0], Counted: true},
		outcome: outcomeReleased, started: released, finished: released}})
	require.NoError(t, err)
	late, err := queries.New(pool).OutboxExtendLeases(ctx, queries.OutboxExtendLeasesParams{
		LeaseSeconds: 60, Ids: []int64{beta[0].ID}, LeaseVersions: []int64{beta[0].LeaseVersion}})
	require.NoError(t, err)
	require.Empty(t, late, "a late heartbeat of a released lease")
	require.Equal(t, 1, countWhere(t, pool, "id = $1 AND state = 'pending' AND lease_owner IS NULL AND leased_until IS NULL", beta[0].ID))
}

// hotUpdates runs f in a transaction of its own and says how many outbox
// rows it updated, and how many of those updates were HOT: the difference
// in the backend's statistics, which may still hold counts of its earlier
// transactions, not yet reported (nothing is reported in a transaction).
func hotUpdates(t *testing.T, pool *pgxpool.Pool, f func(q *queries.Queries)) (updated, hot int64) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	counts := func() (updated, hot int64) {
		require.NoError(t, tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_updated('switchyard.outbox'::regclass),
			pg_stat_get_xact_tuples_hot_updated('switchyard.outbox'::regclass)`).Scan(&updated, &hot))
		return updated, hot
	}
	updatedBefore, hotBefore := counts()
	f(queries.New(tx))
	updated, hot = counts()
	require.NoError(t, tx.Commit(ctx))
	return updated - updatedBefore, hot - hotBefore
}

// A claim, a heartbeat and a finalize cost what they touch, not what the
// outbox holds: on an outbox big enough, its statistics fresh, for the
// planner to prefer reading it whole, none of them reads it sequentially.
// Joined to its claimed ids, the unordered claim hashed the whole table as
// soon as a claim was large (BENCHMARKS.md, "Claims and finalizes that
// cost what they touch"). The scans are counted in the transaction's own
// statistics. The finalize's plan for its arguments reads the outbox by
// ids that the planner does not estimate one by one.
func TestClaimHeartbeatAndFinalizeNeverReadTheWholeOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	// Retries, leased one by one (first tries are leased in a stretch,
	// never read by their ids).
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, attempts)
		SELECT 't', 'alpha', '{}', 1 FROM generate_series(1, 20000)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE switchyard.outbox`)
	require.NoError(t, err)
	d := newDispatcher(t, pool, Config{})

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	q := queries.New(tx)
	// The backend's statistics may still hold counts of its earlier
	// transactions, not yet reported: the difference is this one's.
	scans := func() (seq, index int64) {
		require.NoError(t, tx.QueryRow(ctx, `SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables WHERE relid = 'switchyard.outbox'::regclass`).Scan(&seq, &index))
		return seq, index
	}
	seqBefore, indexBefore := scans()
	const claim = 1024 // a fast destination's claim: 32 deliveries of 32 messages
	claimed, err := q.OutboxClaimUnordered(ctx, queries.OutboxClaimUnorderedParams{
		Owner: "A", LeaseSeconds: 30, Destinations: []string{"alpha"}, Caps: []int32{claim}, BatchSize: claim})
	require.NoError(t, err)
	require.Len(t, claimed, claim)
	extend := queries.OutboxExtendLeasesParams{LeaseSeconds: 30}
	results := make([]result, len(claimed))
	now := time.Now()
	for i, row := range claimed {
		extend.Ids = append(extend.Ids, row.ID)
		extend.LeaseVersions = append(extend.LeaseVersions, row.LeaseVersion)
		results[i] = result{msg: claimedMessage{OutboxClaimUnorderedRow: row, Counted: true}, outcome: outcomeDelivered, started: now, finished: now}
	}
	extended, err := q.OutboxExtendLeases(ctx, extend)
	require.NoError(t, err)
	require.Len(t, extended, claim)
	// A finalize this large is planned for its arguments (customPlans),
	// and the planner estimates a condition on an array argument element
	// by element: the outbox's index condition reads the ids from the
	// input the finalize unnests (BENCHMARKS.md, "The finalize's ids read
	// from its input").
	var finalize capturedQuery
	_, err = queries.New(&finalize).OutboxFinalize(ctx, d.finalizeParams("A", results, nil))
	require.ErrorIs(t, err, errCaptured)
	var plan []byte
	require.NoError(t, tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+finalize.sql, withCustomPlan(finalize.args)...).Scan(&plan))
	var explained []struct{ Plan map[string]any }
	require.NoError(t, json.Unmarshal(plan, &explained))
	require.Len(t, explained, 1)
	conds := outboxIndexConds(explained[0].Plan)
	require.NotEmpty(t, conds, "the finalize reads the outbox: %s", plan)
	for _, cond := range conds {
		require.Contains(t, cond, "id = ANY", "the outbox is read by an index on its ids: %s", plan)
		require.NotContains(t, cond, "'{", "the ids are the input's, not an array argument the planner estimates: %s", cond)
	}
	require.False(t, rescansInput(explained[0].Plan), "no nested loop reads the input once per row: %s", plan)
	finalized, err := q.OutboxFinalize(ctx, d.finalizeParams("A", results, nil))
	require.NoError(t, err)
	require.Len(t, finalized, claim)

	seq, index := scans()
	require.Zero(t, seq-seqBefore, "sequential scans of the outbox")
	require.Positive(t, index-indexBefore, "index scans of the outbox: the statistics count scans")
	require.Equal(t, claim, countWhereIn(t, tx, "state = 'delivered'"))
}

// One worker may finalize a message twice in one batch: a delivery whose
// lease ran out before its outcome was finalized (a loaded machine: its
// heartbeat and finalize timed out), and the same message's delivery
// under its next lease, which the worker claimed again. Only the current
// lease's row applies, and only it is recorded as applied (a chaos run,
// seed 909, found the stale one recorded as applied too: attempts were
// matched to the update by message id alone), and the statistics count one
// delivery.
func TestFencingOneBatchWithBothLeasesOfAMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)})
	var clock atomic.Int64
	clock.Store(time.Now().Add(time.Second).UnixNano())
	d := newDispatcher(t, pool, Config{
		LeaseDuration: 10 * time.Second,
		Clock:         func() time.Time { return time.Unix(0, clock.Load()) },
		Routes:        map[string]Route{"alpha": {Destination: destination.Func(nil)}},
	})
	first := claimOne(t, d, "A")
	clock.Add(int64(11 * time.Second))
	second := claimOne(t, d, "A")
	require.Equal(t, first.LeaseVersion+1, second.LeaseVersion)
	now := time.Now()
	_, _, err := d.finalize(ctx, "A", []result{
		{msg: first, outcome: outcomeDelivered, started: now, finished: now},
		{msg: second, outcome: outcomeDelivered, started: now, finished: now},
	})
	require.NoError(t, err)
	require.Equal(t, 1, countWhere(t, pool, "state = 'delivered' AND lease_version = $1", second.LeaseVersion))
	rows, err := pool.Query(ctx, `SELECT lease_version, applied FROM switchyard.outbox_attempt_log ORDER BY lease_version`)
	require.NoError(t, err)
	type attempt struct {
		LeaseVersion int64
		Applied      bool
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[attempt])
	require.NoError(t, err)
	require.Equal(t, []attempt{{first.LeaseVersion, false}, {second.LeaseVersion, true}}, got)
	var delivered int
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(sum(delivered), 0) FROM switchyard.delivery_stats`).Scan(&delivered))
	require.Equal(t, 1, delivered, "one delivery counted")
}

// Invariant 2 for ordered messages, whose lease is their aggregate's: A's
// aggregate lease expires, B claims the aggregate (and so its messages), A's
// finalize changes neither the messages nor the aggregate, B's moves both on.
func TestFencingOfAnAggregateLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	enqueue(t, pool,
		Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: "1", Payload: []byte(`{"n": 0}`)},
		Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: "1", Payload: []byte(`{"n": 1}`)})
	var clock atomic.Int64
	clock.Store(time.Now().Add(time.Second).UnixNano())
	d := newDispatcher(t, pool, Config{
		LeaseDuration: 10 * time.Second,
		Clock:         func() time.Time { return time.Unix(0, clock.Load()) },
		Routes:        map[string]Route{"alpha": {Destination: destination.Func(nil)}},
	})

	a, err := d.claim(ctx, "A", 10, nil)
	require.NoError(t, err)
	require.Len(t, a, 1, "one aggregate")
	require.Len(t, a[0].msgs, 2, "its messages, together")
	require.Less(t, a[0].msgs[0].AggregateSeq, a[0].msgs[1].AggregateSeq, "in order")
	// The claim writes the head only: it carries the lease and counts its
	// attempt; the message after it is read, and only the aggregate's lease
	// fences it (below: A's finalize of it changes nothing).
	leases := func() (heads, others string) {
		var h, o string
		require.NoError(t, pool.QueryRow(ctx, `SELECT
			string_agg(format('%s/%s/%s', coalesce(lease_owner, '-'), lease_version, attempts), ',' ORDER BY id) FILTER (WHERE aggregate_seq = 1),
			string_agg(format('%s/%s/%s', coalesce(lease_owner, '-'), lease_version, attempts), ',' ORDER BY id) FILTER (WHERE aggregate_seq > 1)
			FROM switchyard.outbox`).Scan(&h, &o))
		return h, o
	}
	heads, others := leases()
	require.Equal(t, []string{"A/1/1", "-/0/0"}, []string{heads, others})
	require.Equal(t, []int64{1, 0}, []int64{a[0].msgs[0].LeaseVersion, a[0].msgs[1].LeaseVersion})
	require.Equal(t, []int32{1, 1}, []int32{a[0].msgs[0].Attempts, a[0].msgs[1].Attempts}, "the attempt each would be")
	none, err := d.claim(ctx, "B", 10, nil)
	require.NoError(t, err)
	require.Empty(t, none, "a leased aggregate is not claimable")

	clock.Add(int64(11 * time.Second))
	b, err := d.claim(ctx, "B", 10, nil)
	require.NoError(t, err)
	require.Len(t, b, 1, "an expired aggregate lease is claimable again")
	require.Equal(t, a[0].msgs[0].AggregateLeaseVersion+1, b[0].msgs[0].AggregateLeaseVersion)
	heads, others = leases()
	require.Equal(t, []string{"B/2/2", "-/0/0"}, []string{heads, others})

	now := time.Now()
	delivered := func(g group) []result {
		var rs []result
		for _, m := range g.msgs {
			rs = append(rs, result{msg: m, outcome: outcomeDelivered, started: now, finished: now})
		}
		return rs
	}
	_, _, err = d.finalize(ctx, "A", delivered(a[0]))
	require.NoError(t, err)
	require.Equal(t, 2, countWhere(t, pool, "state = 'pending'"), "A's stale finalize changed no message")
	var done int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT done_seq FROM switchyard.outbox_aggregates`).Scan(&done))
	require.Zero(t, done, "nor the aggregate")

	_, _, err = d.finalize(ctx, "B", delivered(b[0]))
	require.NoError(t, err)
	require.Equal(t, 2, countWhere(t, pool, "state = 'delivered'"))
	require.NoError(t, pool.QueryRow(ctx, `SELECT done_seq FROM switchyard.outbox_aggregates`).Scan(&done))
	require.Equal(t, b[0].msgs[1].AggregateSeq, done, "B's finalize moved the aggregate on")
}

// claimOne claims as worker and expects exactly one unordered message.
func claimOne(t *testing.T, d *Dispatcher, worker string) claimedMessage {
	t.Helper()
	groups, err := d.claim(context.Background(), worker, 10, nil)
	require.NoError(t, err)
	require.Len(t, groups, 1)
	require.Len(t, groups[0].msgs, 1)
	return groups[0].msgs[0]
}

// flaky is an in-process destination that fails and times out at random,
// and checks that no message is ever delivered by two workers at once and
// that every attempt of a row carries the same idempotency key.
type flaky struct {
	failRate, timeoutRate float64
	mu                    sync.Mutex
	inFlight              map[string]bool  // guarded by mu
	delivered             map[string]int   // guarded by mu: successful deliveries per message id
	order                 map[string][]int // guarded by mu: successful deliveries per aggregate
	keys                  map[string]int   // guarded by mu: payload n seen under each message id
	violations            []string         // guarded by mu
}

func newFlaky(failRate, timeoutRate float64) *flaky {
	return &flaky{failRate: failRate, timeoutRate: timeoutRate,
		inFlight: map[string]bool{}, delivered: map[string]int{}, order: map[string][]int{}, keys: map[string]int{}}
}

// check records one attempt and the invariants it must respect: no
// concurrent attempts of one message, one idempotency key per message on
// every attempt, and no attempt in an aggregate before its predecessors
// were delivered.
func (f *flaky) check(d destination.Delivery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := payloadN(d.Payload)
	if f.inFlight[d.MessageID] {
		f.violations = append(f.violations, "concurrent delivery of "+d.MessageID)
	}
	f.inFlight[d.MessageID] = true
	if prev, seen := f.keys[d.MessageID]; seen && prev != n {
		f.violations = append(f.violations, fmt.Sprintf("key %s carried payloads %d and %d", d.MessageID, prev, n))
	}
	f.keys[d.MessageID] = n
	if d.AggregateID != "" && len(f.order[d.AggregateID]) != n {
		f.violations = append(f.violations, fmt.Sprintf("aggregate %s: attempt of %d after only %d delivered", d.AggregateID, n, len(f.order[d.AggregateID])))
	}
}

func (f *flaky) Deliver(ctx context.Context, d destination.Delivery) (destination.Outcome, error) {
	f.check(d)
	defer func() {
		f.mu.Lock()
		delete(f.inFlight, d.MessageID)
		f.mu.Unlock()
	}()
	switch r := rand.Float64(); {
	case r < f.timeoutRate:
		<-ctx.Done()
		return destination.Outcome{}, fmt.Errorf("timeout: %w", ctx.Err())
	case r < f.timeoutRate+f.failRate:
		return destination.Outcome{StatusCode: 503}, errors.New("HTTP 503: try later")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delivered[d.MessageID]++
	if d.AggregateID != "" {
		f.order[d.AggregateID] = append(f.order[d.AggregateID], payloadN(d.Payload))
	}
	return destination.Outcome{StatusCode: 200}, nil
}

// A delivery starts only once its lease is committed: seen from another
// connection as it starts, an unordered message's own row is leased, or
// its stretch is there, and an ordered message's aggregate is leased. A claim whose rows reached their
// deliveries before its commit did (tried: a claim's statement in a
// transaction committed after its rows were handed on) fails here, since a
// lease lost with its commit would let another dispatcher deliver the
// same messages. It holds with the claims planned for their arguments,
// and with them prepared, on the claims' own connections (runClaim; what
// happens when a claim's commit fails:
// TestAClaimWhoseCommitFailsHandsNothingOn).
func TestADeliveryStartsOnlyOnceItsLeaseIsCommitted(t *testing.T) {
	t.Parallel()
	for _, prepared := range []bool{false, true} {
		t.Run(fmt.Sprintf("prepared=%v", prepared), func(t *testing.T) {
			t.Parallel()
			messages := 400
			if prepared {
				messages = planStatisticsFloor
			}
			pool, claims := claimCountingPool(t, "alpha")
			enqueue(t, pool, mixedMessages(messages, 20)...)
			if prepared {
				describeForPreparedClaims(t, pool)
			}
			observer, err := pgxpool.New(context.Background(), pool.Config().ConnString())
			require.NoError(t, err)
			t.Cleanup(observer.Close)
			dest := &leaseObserved{flaky: newFlaky(0, 0), observer: observer}
			deliverAll(t, pool, dest, messages)

			dest.mu.Lock()
			defer dest.mu.Unlock()
			require.Empty(t, dest.unleased, "deliveries that started before their lease was committed")
			require.Empty(t, dest.violations)
			require.Len(t, dest.delivered, messages)
			for _, kind := range claimKinds {
				require.Equal(t, prepared, claims.preparedClaims()[kind] > 0, "claims of %s on the claims' connections", kind)
			}
		})
	}
}

// leaseObserved is a flaky destination that, as each delivery starts,
// reads from another connection whether the message's lease is committed.
type leaseObserved struct {
	*flaky
	observer *pgxpool.Pool
	unleased []string // guarded by flaky.mu
}

func (l *leaseObserved) Deliver(ctx context.Context, d destination.Delivery) (destination.Outcome, error) {
	var leased bool
	err := l.observer.QueryRow(ctx, `
		SELECT CASE WHEN $2 = '' THEN (SELECT o.lease_owner IS NOT NULL OR EXISTS (
				SELECT FROM switchyard.outbox_stretches s WHERE o.id = ANY (s.ids))
			FROM switchyard.outbox o WHERE o.message_id = $1::uuid)
		ELSE (SELECT a.lease_owner IS NOT NULL FROM switchyard.outbox_aggregates a WHERE a.aggregate_type = $3 AND a.aggregate_id = $2) END`,
		d.MessageID, d.AggregateID, d.AggregateType).Scan(&leased)
	if err != nil || !leased {
		l.mu.Lock()
		l.unleased = append(l.unleased, fmt.Sprintf("%s (%v)", d.MessageID, err))
		l.mu.Unlock()
	}
	return l.flaky.Deliver(ctx, d)
}

// Invariant 3 under load: 8 workers in 2 dispatchers, a destination failing
// 30 % and timing out 5 %: every message ends delivered or dead, never two
// deliveries of one message at once, the same key on every attempt.
func TestManyWorkersDeliverEverythingOnce(t *testing.T) {
	t.Parallel()
	const messages = 5000
	pool := setup(t, "flaky")
	dest := newFlaky(0.30, 0.05)
	var msgs []Message
	for i := range messages {
		msgs = append(msgs, Message{Topic: "t", Destination: "flaky", Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	enqueue(t, pool, msgs...)
	route := Route{Destination: dest, Retry: fastRetry(8), Timeout: 50 * time.Millisecond}
	for i := range 2 {
		startDispatcher(t, pool, Config{Owner: fmt.Sprint("d", i), Workers: 4, BatchSize: 100, Routes: map[string]Route{"flaky": route}})
	}
	testwait.Until(t, 2*time.Minute, "every message delivered or dead", func() bool {
		return countWhere(t, pool, "state = 'pending'") == 0
	})
	dest.mu.Lock()
	defer dest.mu.Unlock()
	require.Empty(t, dest.violations)
	delivered := countWhere(t, pool, "state = 'delivered'")
	dead := countWhere(t, pool, "state = 'dead'")
	require.Equal(t, messages, delivered+dead)
	require.Equal(t, delivered, len(dest.delivered), "each delivered row was received")
	require.Len(t, dest.keys, messages, "one idempotency key per message, the same on every attempt")
	for id, n := range dest.delivered {
		require.Equal(t, 1, n, "message %s acknowledged more than once", id)
	}
	// Every attempt of a row is recorded under that row, and the keys seen
	// by the destination are exactly the rows' message ids.
	var orphanAttempts int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM switchyard.outbox_attempts a LEFT JOIN switchyard.outbox o ON o.id = a.message_id WHERE o.id IS NULL`).Scan(&orphanAttempts))
	require.Zero(t, orphanAttempts)
	requireDeadLetterGroupsMatch(t, pool)
}

// requireDeadLetterGroupsMatch checks the maintained dead-letter groups
// against the messages themselves: a group counts its dead messages that
// were neither replayed nor discarded, lists their destinations, has a
// sample from the group, and an hourly trend that adds up to every message
// that ever went dead with that fingerprint.
func requireDeadLetterGroupsMatch(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var mismatches int
	require.NoError(t, pool.QueryRow(context.Background(), `
		WITH actual AS (
			SELECT error_fingerprint AS fingerprint, count(*) AS dead,
				array_agg(DISTINCT destination ORDER BY destination) AS destinations
			FROM switchyard.outbox WHERE state = 'dead' AND replays = 0 GROUP BY error_fingerprint),
		ever AS (
			SELECT error_fingerprint AS fingerprint, count(*) AS dead
			FROM switchyard.outbox WHERE state IN ('dead', 'discarded') GROUP BY error_fingerprint),
		hours AS (SELECT fingerprint, sum(dead) AS dead FROM switchyard.dead_letter_hours GROUP BY fingerprint)
		SELECT count(*) FROM ever e
		FULL JOIN switchyard.dead_letter_groups g ON g.fingerprint = e.fingerprint
		LEFT JOIN actual a ON a.fingerprint = e.fingerprint
		LEFT JOIN hours h ON h.fingerprint = coalesce(e.fingerprint, g.fingerprint)
		WHERE coalesce(a.dead, 0) IS DISTINCT FROM g.dead::bigint
			OR (a.dead > 0 AND NOT g.destinations @> a.destinations)
			OR h.dead IS DISTINCT FROM e.dead
			OR NOT EXISTS (SELECT 1 FROM switchyard.outbox o WHERE o.id = g.sample_id AND o.error_fingerprint = g.fingerprint)`,
	).Scan(&mismatches))
	require.Zero(t, mismatches, "dead-letter groups disagree with the dead messages")
}

// Dead letters are grouped by their error's fingerprint: errors that differ
// only in numbers, ids or addresses share a group.
func TestDeadLettersAreGroupedByFingerprint(t *testing.T) {
	t.Parallel()
	pool := setup(t, "a", "b")
	fails := func(format string) destination.Destination {
		return destination.Func(func(_ context.Context, d destination.Delivery) (destination.Outcome, error) {
			return destination.Outcome{}, destination.Permanent(fmt.Errorf(format, d.MessageID))
		})
	}
	var msgs []Message
	for i := range 30 {
		dest := []string{"a", "b"}[i%2]
		msgs = append(msgs, Message{Topic: "t", Destination: dest, Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	enqueue(t, pool, msgs...)
	var announced atomic.Int64
	d := startDispatcher(t, pool, Config{Workers: 2, BatchSize: 4, Changed: func() { announced.Add(1) }, Routes: map[string]Route{
		"a": {Destination: fails("order %s rejected: 422 from 10.1.2.3")},
		"b": {Destination: fails("no such customer %s")},
	}})
	testwait.Until(t, time.Minute, "every message dead", func() bool { return countWhere(t, pool, "state = 'dead'") == 30 })
	d.Stop() // every finalize has returned
	var fed, rows int64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT coalesce(sum((payload->>'dead')::int), 0), count(*) FROM switchyard.changes WHERE kind = 'dead_letter'`).Scan(&fed, &rows))
	require.Equal(t, int64(30), fed, "the change feed says how many went dead")
	require.LessOrEqual(t, rows, announced.Load()*2, "each finalize that fed the feed announced it (at most one row per group)")
	require.Positive(t, announced.Load())
	var groups int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM switchyard.dead_letter_groups WHERE dead = 15`).Scan(&groups))
	require.Equal(t, 2, groups, "one group per error, whatever the ids in its text")
	requireDeadLetterGroupsMatch(t, pool)
}

// Invariant 4: within an aggregate, delivery order is enqueue order, even
// with failures and retries.
func TestOrderWithinAggregates(t *testing.T) {
	t.Parallel()
	const aggregates, perAggregate = 1000, 5
	pool := setup(t, "ordered")
	dest := newFlaky(0.2, 0)
	var msgs []Message
	for n := range perAggregate {
		for a := range aggregates {
			msgs = append(msgs, Message{Topic: "t", Destination: "ordered", AggregateType: "order",
				AggregateID: fmt.Sprint(a), Payload: fmt.Appendf(nil, `{"n":%d}`, n)})
		}
	}
	enqueue(t, pool, msgs...)
	route := Route{Destination: dest, Retry: fastRetry(1000)}
	for i := range 2 {
		startDispatcher(t, pool, Config{Owner: fmt.Sprint("d", i), Workers: 4, BatchSize: 64, Routes: map[string]Route{"ordered": route}})
	}
	testwait.Until(t, 2*time.Minute, "every message delivered", func() bool {
		return countWhere(t, pool, "state = 'delivered'") == aggregates*perAggregate
	})
	dest.mu.Lock()
	defer dest.mu.Unlock()
	require.Empty(t, dest.violations)
	require.Len(t, dest.order, aggregates)
	for agg, got := range dest.order {
		want := make([]int, perAggregate)
		for i := range want {
			want[i] = i
		}
		require.Equal(t, want, got, "aggregate %s", agg)
	}
}

// A dead head blocks its aggregate; other aggregates go on.
func TestDeadHeadBlocksItsAggregateOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "strict")
	dest := destination.Func(func(_ context.Context, d destination.Delivery) (destination.Outcome, error) {
		if d.AggregateID == "poisoned" && payloadN(d.Payload) == 0 {
			return destination.Outcome{StatusCode: 422}, destination.Permanent(errors.New("HTTP 422: invalid order"))
		}
		return destination.Outcome{StatusCode: 200}, nil
	})
	var msgs []Message
	for n := range 3 {
		for _, agg := range []string{"poisoned", "healthy"} {
			msgs = append(msgs, Message{Topic: "t", Destination: "strict", AggregateType: "order",
				AggregateID: agg, Payload: fmt.Appendf(nil, `{"n":%d}`, n)})
		}
	}
	enqueue(t, pool, msgs...)
	d := startDispatcher(t, pool, Config{Routes: map[string]Route{"strict": {Destination: dest, Retry: fastRetry(5)}}})
	testwait.Until(t, time.Minute, "healthy aggregate delivered", func() bool {
		return countWhere(t, pool, "aggregate_id = 'healthy' AND state = 'delivered'") == 3 &&
			countWhere(t, pool, "aggregate_id = 'poisoned' AND state = 'dead'") == 1
	})
	probe, err := d.claim(ctx, "probe", 10, nil)
	require.NoError(t, err)
	require.Empty(t, probe, "nothing behind a dead head is claimable")
	require.Equal(t, 2, countWhere(t, pool, "aggregate_id = 'poisoned' AND state = 'pending' AND attempts = 0"),
		"the messages behind the dead head wait untouched")
	blocked, err := BlockedAggregates(ctx, pool, 10)
	require.NoError(t, err)
	require.Len(t, blocked, 1)
	require.Equal(t, "poisoned", blocked[0].AggregateID)
	require.Equal(t, int64(2), blocked[0].Waiting)
	require.Equal(t, 1, countWhere(t, pool, "state = 'dead' AND error_fingerprint IS NOT NULL AND last_error LIKE 'HTTP 422%'"))
}

// payloadN reads the "n" of a test payload; -1 if it has none.
func payloadN(payload []byte) int {
	var p struct{ N *int }
	if json.Unmarshal(payload, &p) != nil || p.N == nil {
		return -1
	}
	return *p.N
}

// The dispatcher registers itself, and its stats add up to its outcomes.
func TestDispatcherRegistersAndKeepsStats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "stats")
	var msgs []Message
	for i := range 100 {
		msgs = append(msgs, Message{Topic: fmt.Sprint("topic.", i%2), Destination: "stats", Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	enqueue(t, pool, msgs...)
	dest := destination.Func(func(_ context.Context, d destination.Delivery) (destination.Outcome, error) {
		if payloadN(d.Payload)%10 == 0 {
			return destination.Outcome{StatusCode: 400}, destination.Permanent(errors.New("HTTP 400: bad"))
		}
		return destination.Outcome{StatusCode: 200}, nil
	})
	d := newDispatcher(t, pool, Config{Owner: "stats-test", Workers: 2, Routes: map[string]Route{"stats": {Destination: dest}}})
	require.NoError(t, d.Start(ctx))
	testwait.Until(t, time.Minute, "all finished", func() bool { return countWhere(t, pool, "state = 'pending'") == 0 })
	var workers int
	var stopped *time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT workers, stopped_at FROM switchyard.dispatchers WHERE owner = 'stats-test'`).Scan(&workers, &stopped))
	require.Equal(t, 2, workers)
	require.Nil(t, stopped)
	d.Stop()
	require.NoError(t, pool.QueryRow(ctx, `SELECT workers, stopped_at FROM switchyard.dispatchers WHERE owner = 'stats-test'`).Scan(&workers, &stopped))
	require.NotNil(t, stopped, "a stopped dispatcher says so")

	var delivered, dead, topics int
	require.NoError(t, pool.QueryRow(ctx, `SELECT sum(delivered), sum(dead), count(DISTINCT topic) FROM switchyard.delivery_stats`).Scan(&delivered, &dead, &topics))
	require.Equal(t, 90, delivered)
	require.Equal(t, 10, dead)
	require.Equal(t, 2, topics)
}

func TestRetentionPrunesOnlyOldDeliveredHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "r")
	var msgs []Message
	for i := range 6 {
		msgs = append(msgs, Message{Topic: "t", Destination: "r", Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	enqueue(t, pool, msgs...)
	// n 0-2 delivered long ago, n 3 delivered now, n 4 dead long ago, n 5
	// pending; n 1 has a replay pointing at it.
	_, err := pool.Exec(ctx, `
		UPDATE switchyard.outbox SET state = 'delivered', finished_at = now() - interval '30 days' WHERE (payload->>'n')::int IN (0, 1, 2);
		UPDATE switchyard.outbox SET state = 'delivered', finished_at = now() WHERE (payload->>'n')::int = 3;
		UPDATE switchyard.outbox SET state = 'dead', finished_at = now() - interval '30 days' WHERE (payload->>'n')::int = 4;
		UPDATE switchyard.outbox SET replay_of = (SELECT id FROM switchyard.outbox WHERE (payload->>'n')::int = 1) WHERE (payload->>'n')::int = 5;`)
	require.NoError(t, err)
	pruned, err := Prune(ctx, pool, Retention{}, time.Now())
	require.NoError(t, err)
	require.Equal(t, int64(2), pruned.Delivered)
	var left []int
	rows, err := pool.Query(ctx, `SELECT (payload->>'n')::int FROM switchyard.outbox ORDER BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var n int
		require.NoError(t, rows.Scan(&n))
		left = append(left, n)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int{1, 3, 4, 5}, left, "recent, replayed-from, dead and pending messages stay")
}

// An aggregate with nothing left to deliver loses its bookkeeping row after
// a while; one with work, a recent one and a blocked one keep theirs, and a
// pruned aggregate's next message starts it again and is delivered.
func TestRetentionPrunesIdleAggregatesOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "r")
	msg := func(aggregate string) Message {
		return Message{Topic: "t", Destination: "r", AggregateType: "a", AggregateID: aggregate, Payload: []byte(`{}`)}
	}
	enqueue(t, pool, msg("idle"), msg("busy"), msg("recent"), msg("blocked"))
	_, err := pool.Exec(ctx, `
		UPDATE switchyard.outbox SET state = 'delivered', finished_at = now() WHERE aggregate_id IN ('idle', 'recent');
		UPDATE switchyard.outbox_aggregates SET done_seq = last_seq, due_at = now() - interval '1 hour' WHERE aggregate_id = 'idle';
		UPDATE switchyard.outbox_aggregates SET done_seq = last_seq, due_at = now() WHERE aggregate_id = 'recent';
		UPDATE switchyard.outbox_aggregates SET due_at = now() - interval '1 hour' WHERE aggregate_id = 'busy';
		UPDATE switchyard.outbox SET state = 'dead', finished_at = now() WHERE aggregate_id = 'blocked';
		UPDATE switchyard.outbox_aggregates SET done_seq = last_seq, due_at = 'infinity' WHERE aggregate_id = 'blocked';`)
	require.NoError(t, err)
	pruned, err := Prune(ctx, pool, Retention{}, time.Now())
	require.NoError(t, err)
	require.Equal(t, int64(1), pruned.IdleAggregates)
	require.Equal(t, []string{"blocked", "busy", "recent"}, aggregateIDs(t, pool))

	enqueue(t, pool, msg("idle"))
	var seq int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT aggregate_seq FROM switchyard.outbox WHERE aggregate_id = 'idle' AND state = 'pending'`).Scan(&seq))
	require.Equal(t, int64(1), seq, "a pruned aggregate starts again")
	d := newDispatcher(t, pool, Config{Routes: map[string]Route{"r": {Destination: destination.Func(nil)}}})
	groups, err := d.claim(ctx, "w", 10, nil)
	require.NoError(t, err)
	var claimed []string
	for _, g := range groups {
		claimed = append(claimed, g.msgs[0].AggregateID)
	}
	require.ElementsMatch(t, []string{"idle", "busy"}, claimed, "work is claimed, a blocked aggregate is not")
}

func aggregateIDs(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT aggregate_id FROM switchyard.outbox_aggregates ORDER BY 1`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ids
}

// Stop lets deliveries in flight finish and finalizes them; messages it
// claimed but never started are released with their attempt given back.
func TestStopFinishesInFlightAndReleasesTheRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "slow")
	var msgs []Message
	for i := range 10 {
		msgs = append(msgs, Message{Topic: "t", Destination: "slow", Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	enqueue(t, pool, msgs...)
	started, finish := make(chan struct{}, 10), make(chan struct{})
	g, err := guard.New("slow", guard.Config{Concurrency: 2}, nil)
	require.NoError(t, err)
	dest := destination.Func(func(context.Context, destination.Delivery) (destination.Outcome, error) {
		started <- struct{}{}
		<-finish
		return destination.Outcome{StatusCode: 200}, nil
	})
	d := newDispatcher(t, pool, Config{Workers: 1, BatchSize: 10, StopGrace: time.Minute,
		Routes: map[string]Route{"slow": {Destination: dest, Guard: g}}})
	require.NoError(t, d.Start(ctx))
	<-started
	<-started // the bulkhead lets two run; eight wait for a slot
	stopped := make(chan struct{})
	go func() {
		d.Stop()
		close(stopped)
	}()
	testwait.Until(t, 10*time.Second, "stop to begin", func() bool { return d.stopping() })
	close(finish)
	<-stopped
	require.Equal(t, 0, countWhere(t, pool, "lease_owner IS NOT NULL"), "no lease is left held")
	delivered := countWhere(t, pool, "state = 'delivered' AND attempts = 1")
	released := countWhere(t, pool, "state = 'pending' AND attempts = 0")
	require.GreaterOrEqual(t, delivered, 2)
	require.Equal(t, 10, delivered+released)
}

// An idle dispatcher starts delivering as soon as an enqueuer notifies
// after its commit, long before its next poll.
func TestNotifyWakesAnIdleDispatcher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "quick")
	got := make(chan struct{}, 1)
	dest := destination.Func(func(context.Context, destination.Delivery) (destination.Outcome, error) {
		got <- struct{}{}
		return destination.Outcome{StatusCode: 200}, nil
	})
	startDispatcher(t, pool, Config{IdlePoll: time.Hour, Routes: map[string]Route{"quick": {Destination: dest}}})
	testwait.Until(t, time.Minute, "the dispatcher to listen", func() bool {
		// Other tests' dispatchers listen too, in their own databases.
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE '%LISTEN' || ' switchyard_outbox%'`).Scan(&n))
		return n == 1
	})
	enqueue(t, pool, Message{Topic: "t", Destination: "quick", Payload: []byte(`{}`)})
	require.NoError(t, Notify(ctx, pool))
	testwait.For(t, 30*time.Second, "the notification to wake the dispatcher (its poll is an hour away)", got)
}

// A destination that hangs holds only the slots of its own deliveries:
// the other destination's messages flow past it.
func TestHangingDestinationDoesNotSlowTheOthers(t *testing.T) {
	t.Parallel()
	pool := setup(t, "hangs", "flows")
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hangs := destination.Func(func(ctx context.Context, _ destination.Delivery) (destination.Outcome, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return destination.Outcome{}, errors.New("dial tcp 10.0.0.1:443: i/o timeout")
	})
	flows := destination.Func(func(context.Context, destination.Delivery) (destination.Outcome, error) {
		return destination.Outcome{StatusCode: 200}, nil
	})
	var msgs []Message
	for i := range 400 {
		dest := "flows"
		if i%20 == 0 {
			dest = "hangs"
		}
		msgs = append(msgs, Message{Topic: "t", Destination: dest, Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	enqueue(t, pool, msgs...)
	startDispatcher(t, pool, Config{Workers: 1, BatchSize: 50, StopGrace: time.Second, Routes: map[string]Route{
		"hangs": {Destination: hangs, Timeout: time.Hour, Retry: fastRetry(3)},
		"flows": {Destination: flows},
	}})
	testwait.Until(t, time.Minute, "the healthy destination drained while the other hangs", func() bool {
		return countWhere(t, pool, "destination = 'flows' AND state = 'delivered'") == 380
	})
	require.Equal(t, 20, countWhere(t, pool, "destination = 'hangs' AND state = 'pending'"))
}

// A destination that cannot keep up holds at most half a worker's window
// (here twice its bulkhead of 2 is less than that): its waiting messages
// must not fill the window while another destination's messages are due. Here the saturated destination's messages
// are older and more numerous than the window, and its two slots hang.
func TestSaturatedDestinationDoesNotHoldTheWindow(t *testing.T) {
	t.Parallel()
	pool := setup(t, "narrow", "flows")
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var started atomic.Int64
	narrow := destination.Func(func(ctx context.Context, _ destination.Delivery) (destination.Outcome, error) {
		started.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return destination.Outcome{}, nil
	})
	g, err := guard.New("narrow", guard.Config{Concurrency: 2}, nil)
	require.NoError(t, err)
	var msgs []Message
	for i := range 40 {
		msgs = append(msgs, Message{Topic: "t", Destination: "narrow", Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	enqueue(t, pool, msgs...)
	msgs = msgs[:0]
	for i := range 30 {
		msgs = append(msgs, Message{Topic: "t", Destination: "flows", Payload: fmt.Appendf(nil, `{"n":%d}`, i)},
			Message{Topic: "t", Destination: "flows", AggregateType: "a", AggregateID: fmt.Sprint(i % 3), Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	enqueue(t, pool, msgs...)
	startDispatcher(t, pool, Config{Workers: 1, BatchSize: 10, StopGrace: time.Second, Routes: map[string]Route{
		"narrow": {Destination: narrow, Timeout: time.Hour, Guard: g},
		"flows": {Destination: destination.Func(func(context.Context, destination.Delivery) (destination.Outcome, error) {
			return destination.Outcome{}, nil
		})},
	}})
	testwait.Until(t, time.Minute, "the other destination drained while the narrow one is full", func() bool {
		return countWhere(t, pool, "destination = 'flows' AND state = 'delivered'") == 60
	})
	require.Equal(t, int64(2), started.Load(), "the narrow destination ran only what its bulkhead allows")
	require.LessOrEqual(t, countWhere(t, pool, "destination = 'narrow' AND lease_owner IS NOT NULL"), 4,
		"and held no more than twice its bulkhead")
}

// A delivery whose lease was taken over is cancelled at the next heartbeat,
// so that two workers never deliver one message at the same time: for an
// unordered message's lease and for an aggregate's. (The lease is long
// enough that a claim, which may take a third of it, succeeds on a busy
// machine.)
func TestLostLeaseCancelsTheDelivery(t *testing.T) {
	t.Parallel()
	for _, aggregate := range []string{"", "order-1"} {
		t.Run("aggregate="+aggregate, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := setup(t, "alpha")
			m := Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)}
			if aggregate != "" {
				m.AggregateType, m.AggregateID = "order", aggregate
			}
			enqueue(t, pool, m)
			base := time.Now().Add(time.Second) // the message is due
			started, cancelled := make(chan struct{}), make(chan struct{})
			holds := destination.Func(func(ctx context.Context, _ destination.Delivery) (destination.Outcome, error) {
				close(started) // once: the test ends before any retry
				<-ctx.Done()
				close(cancelled)
				return destination.Outcome{}, ctx.Err()
			})
			startDispatcher(t, pool, Config{Workers: 1, LeaseDuration: 3 * time.Second,
				Clock: func() time.Time { return base }, Routes: map[string]Route{"alpha": {Destination: holds, Timeout: time.Hour}}})
			testwait.For(t, 30*time.Second, "the delivery started", started)

			// An hour later by B's clock, A's lease has long expired.
			b := newDispatcher(t, pool, Config{Clock: func() time.Time { return base.Add(time.Hour) },
				Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
			groups, err := b.claim(ctx, "B", 10, nil)
			require.NoError(t, err)
			require.Len(t, groups, 1, "B took the lease over")
			testwait.For(t, 30*time.Second, "A's delivery cancelled at its next heartbeat", cancelled)
		})
	}
}

// SetRoutes takes effect while the dispatcher runs: a destination that gets
// a route is claimed, one that loses it is not.
func TestSetRoutesWhileRunning(t *testing.T) {
	t.Parallel()
	pool := setup(t, "a", "b")
	ok := destination.Func(func(context.Context, destination.Delivery) (destination.Outcome, error) {
		return destination.Outcome{StatusCode: 200}, nil
	})
	enqueue(t, pool, Message{Topic: "t", Destination: "a", Payload: []byte(`{}`)}, Message{Topic: "t", Destination: "b", Payload: []byte(`{}`)})
	d := startDispatcher(t, pool, Config{Workers: 1, IdlePoll: 10 * time.Millisecond, Routes: map[string]Route{"a": {Destination: ok}}})
	testwait.Until(t, time.Minute, "a delivered", func() bool { return countWhere(t, pool, "destination = 'a' AND state = 'delivered'") == 1 })
	require.Equal(t, 1, countWhere(t, pool, "destination = 'b' AND state = 'pending' AND attempts = 0"), "b has no route yet")

	d.SetRoutes(map[string]Route{"b": {Destination: ok}})
	testwait.Until(t, time.Minute, "b delivered once routed", func() bool { return countWhere(t, pool, "destination = 'b' AND state = 'delivered'") == 1 })
	enqueue(t, pool, Message{Topic: "t", Destination: "a", Payload: []byte(`{}`)}, Message{Topic: "t", Destination: "b", Payload: []byte(`{}`)})
	testwait.Until(t, time.Minute, "the new b delivered", func() bool { return countWhere(t, pool, "destination = 'b' AND state = 'delivered'") == 2 })
	require.Equal(t, 1, countWhere(t, pool, "destination = 'a' AND state = 'pending' AND attempts = 0"), "a lost its route")
}

// An enqueuing transaction holds its aggregate's row until it ends (the
// trigger numbers its messages). The dispatcher never waits for it: while
// it is open, the dispatcher finishes other aggregates, and the outcomes of
// the held aggregate are applied once it commits, each message delivered
// once and in order.
func TestAnOpenEnqueueNeverHoldsTheDispatcher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "d")
	msg := func(aggregate string, n int) Message {
		return Message{Topic: "t", Destination: "d", AggregateType: "a", AggregateID: aggregate, Payload: fmt.Appendf(nil, `{"n": %d}`, n)}
	}
	enqueue(t, pool, msg("held", 0), msg("held", 1))
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	var mu sync.Mutex
	delivered := map[string][]int{}
	dest := destination.Func(func(ctx context.Context, d destination.Delivery) (destination.Outcome, error) {
		if d.AggregateID == "held" && payloadN(d.Payload) == 0 {
			started <- struct{}{}
			<-release
		}
		mu.Lock()
		defer mu.Unlock()
		delivered[d.AggregateID] = append(delivered[d.AggregateID], payloadN(d.Payload))
		return destination.Outcome{StatusCode: 200}, nil
	})
	startDispatcher(t, pool, Config{Workers: 1, IdlePoll: 10 * time.Millisecond, Routes: map[string]Route{"d": {Destination: dest}}})
	testwait.For(t, 30*time.Second, "the held aggregate's first delivery started", started)

	producer, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = producer.Rollback(ctx) })
	_, err = Enqueue(ctx, producer, msg("held", 2)) // holds the aggregate's row from now on
	require.NoError(t, err)
	close(release) // the held aggregate's deliveries finish; their finalize must not wait

	enqueue(t, pool, msg("other", 0))
	testwait.Until(t, time.Minute, "another aggregate delivered while the enqueue is open", func() bool {
		return countWhere(t, pool, "aggregate_id = 'other' AND state = 'delivered'") == 1
	})
	require.Equal(t, 2, countWhere(t, pool, "aggregate_id = 'held' AND state = 'pending'"), "the held outcomes wait for the enqueue")

	require.NoError(t, producer.Commit(ctx))
	testwait.Until(t, time.Minute, "the held aggregate delivered", func() bool {
		return countWhere(t, pool, "aggregate_id = 'held' AND state = 'delivered'") == 3
	})
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{0, 1, 2}, delivered["held"], "once each, in order")
	require.Zero(t, countWhere(t, pool, "aggregate_id = 'held' AND attempts <> 1"), "one attempt each")
}

// An ordered message claimed behind its aggregate's first counts its
// attempt only when it is tried: a lost finalize or lease leaves the
// untried ones as they were, so they never run out of attempts unsent.
func TestUntriedOrderedMessagesKeepTheirAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "d")
	for n := range 3 {
		enqueue(t, pool, Message{Topic: "t", Destination: "d", AggregateType: "a", AggregateID: "1", Payload: fmt.Appendf(nil, `{"n": %d}`, n)})
	}
	var clock atomic.Int64
	clock.Store(time.Now().Add(time.Second).UnixNano())
	d := newDispatcher(t, pool, Config{LeaseDuration: 10 * time.Second, Clock: func() time.Time { return time.Unix(0, clock.Load()) },
		Routes: map[string]Route{"d": {Destination: destination.Func(nil)}}})
	for range 3 { // three leases lost without a finalize
		groups, err := d.claim(ctx, "w", 10, nil)
		require.NoError(t, err)
		require.Len(t, groups, 1)
		require.Len(t, groups[0].msgs, 3)
		clock.Add(int64(11 * time.Second))
	}
	require.Equal(t, 1, countWhere(t, pool, "payload->>'n' = '0' AND attempts = 3"), "the first is counted at each claim")
	require.Equal(t, 2, countWhere(t, pool, "payload->>'n' <> '0' AND attempts = 0"), "the untried are not")

	groups, err := d.claim(ctx, "w", 10, nil)
	require.NoError(t, err)
	now := time.Now()
	g := groups[0]
	require.Equal(t, int32(1), g.msgs[1].Attempts, "its first attempt, if tried")
	_, _, err = d.finalize(ctx, "w", []result{
		{msg: g.msgs[0], outcome: outcomeDelivered, started: now, finished: now},
		{msg: g.msgs[1], outcome: outcomeRetry, err: "HTTP 503", started: now, finished: now},
		{msg: g.msgs[2], outcome: outcomeReleased, started: now, finished: now},
	})
	require.NoError(t, err)
	require.Equal(t, 1, countWhere(t, pool, "payload->>'n' = '1' AND attempts = 1"), "tried: counted at finalize")
	require.Equal(t, 1, countWhere(t, pool, "payload->>'n' = '2' AND attempts = 0"), "released: still untried")
}

// Start opens two connections for each worker (its claims and its
// finalizes) and one more before the first claim (openConnections): the
// first messages do not wait for connections to be made. No destination
// here, so nothing but Start opens them.
func TestTheDispatcherOpensItsWorkersConnectionsAtStart(t *testing.T) {
	t.Parallel()
	config := setup(t).Config()
	config.MaxConns = 10
	pool, err := pgxpool.NewWithConfig(context.Background(), config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.Zero(t, pool.Stat().TotalConns())
	startDispatcher(t, pool, Config{Workers: 3, HeartbeatInterval: time.Hour})
	require.EqualValues(t, 7, pool.Stat().TotalConns(), "three workers' two connections and one more, open")
	require.EqualValues(t, 7, pool.Stat().IdleConns(), "and given back")
}

// Start returns once the dispatcher's LISTEN is in place (startListening):
// a NOTIFY sent as soon as it has returned wakes the workers, and is
// never lost to a LISTEN connection still being made.
func TestStartReturnsOnceTheDispatcherListens(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	startDispatcher(t, pool, Config{HeartbeatInterval: time.Hour})
	var listening int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%LISTEN switchyard_outbox%'`).Scan(&listening))
	require.Equal(t, 1, listening, "the LISTEN connection, listening")
}
