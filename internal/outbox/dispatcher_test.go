package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
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
	d := New(pool, cfg)
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
	d := New(pool, Config{
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
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{Topic: "t", Destination: "alpha", Payload: []byte(`{"order":"A-1042","status":"paid","amount_cents":12990}`)}
	}
	enqueue(t, pool, msgs...)
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
	enqueue(t, pool, Message{Topic: "t", Destination: "beta", Payload: []byte(`{}`)})
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
	_, _, err := New(pool, Config{}).finalize(ctx, "A", []result{{msg: claimedMessage{OutboxClaimUnorderedRow: beta[0], Counted: true},
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
// statistics.
func TestClaimHeartbeatAndFinalizeNeverReadTheWholeOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	msgs := make([]Message, 20000)
	for i := range msgs {
		msgs[i] = Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)}
	}
	enqueue(t, pool, msgs...)
	_, err := pool.Exec(ctx, `ANALYZE switchyard.outbox`)
	require.NoError(t, err)
	d := New(pool, Config{})

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
	finalized, err := q.OutboxFinalize(ctx, d.finalizeParams("A", results))
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
	d := New(pool, Config{
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
	d := New(pool, Config{
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
// connection as it starts, an unordered message's own row is leased, and
// an ordered message's aggregate. A claim whose rows reached their
// deliveries before its commit did (tried: a claim's statement in a
// transaction committed after its rows were handed on) fails here, since a
// lease lost with its commit would let another dispatcher deliver the
// same messages.
func TestADeliveryStartsOnlyOnceItsLeaseIsCommitted(t *testing.T) {
	t.Parallel()
	const messages = 400
	pool := setup(t, "alpha")
	enqueue(t, pool, mixedMessages(messages, 20)...)
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
		SELECT CASE WHEN $2 = '' THEN (SELECT o.lease_owner IS NOT NULL FROM switchyard.outbox o WHERE o.message_id = $1::uuid)
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
	d := New(pool, Config{Owner: "stats-test", Workers: 2, Routes: map[string]Route{"stats": {Destination: dest}}})
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
	d := New(pool, Config{Routes: map[string]Route{"r": {Destination: destination.Func(nil)}}})
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
	d := New(pool, Config{Workers: 1, BatchSize: 10, StopGrace: time.Minute,
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
			b := New(pool, Config{Clock: func() time.Time { return base.Add(time.Hour) },
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
	d := New(pool, Config{LeaseDuration: 10 * time.Second, Clock: func() time.Time { return time.Unix(0, clock.Load()) },
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

// A finished delivery waits for the worker's flush (or for a full finalize)
// while other deliveries are in flight, so that one finalize carries many
// messages; the last delivery in flight is finalized at once, and so is a
// delivery that makes the finished messages finalizeMost.
func TestFinishedDeliveriesAreFinalizedTogether(t *testing.T) {
	t.Parallel()
	pool := setup(t, "alpha")
	d, groups := claimedApart(t, pool, 3)
	a, b, c := groups[0].msgs[0], groups[1].msgs[0], groups[2].msgs[0]
	w := inFlight(d, groups)
	delivered := func(m claimedMessage) []result {
		now := time.Now()
		return []result{{msg: m, outcome: outcomeDelivered, started: now, finished: now}}
	}
	isDelivered := func(m claimedMessage) bool {
		return countWhere(t, pool, "id = $1 AND state = 'delivered'", m.ID) == 1
	}

	// Stale copies of a pad the finished messages (a finalize records them
	// as not applied): a hundred, three deliveries of 32 messages, do not
	// make a finalize while others are in flight.
	stale := delivered(a)[0]
	stale.msg.LeaseVersion--
	w.done = append(w.done, deliveriesOf(stale, 100)...)
	w.finished(landed{id: 0, results: delivered(a)})
	require.False(t, isDelivered(a), "two deliveries still in flight: a waits for the flush")
	require.Len(t, w.done, 101)

	// b's landing makes the finished messages finalizeMost.
	w.done = append(w.done, deliveriesOf(stale, finalizeMost-1-len(w.done))...)
	w.finished(landed{id: 1, results: delivered(b)})
	require.Empty(t, w.done, "a full finalize does not wait for the flush")
	w.applyFinalize(<-w.finalized)
	require.True(t, isDelivered(a) && isDelivered(b))

	w.finished(landed{id: 2, results: delivered(c)})
	require.Empty(t, w.done, "the last delivery in flight is finalized at once")
	w.applyFinalize(<-w.finalized)
	require.True(t, isDelivered(c))
	require.Empty(t, w.flights)
}

// A finalize never carries part of an aggregate's delivery, even past
// finalizeMost: the finalize of the first part would move the aggregate
// on and free it, the next claim would lease the rest again, and the
// finalize of the rest would be stale (the messages delivered twice). Nor
// does it pass finalizeMost for the next lease of the same aggregate,
// whose results then apply under their own lease.
func TestAFinalizeNeverSplitsAnAggregatesResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)})
	for range 5 {
		enqueue(t, pool, Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: "1", Payload: []byte(`{}`)})
	}
	d := New(pool, Config{Logger: testlog.New(t), Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	groups, err := d.claim(ctx, "w", 10, nil)
	require.NoError(t, err)
	require.Len(t, groups, 2)
	slices.SortFunc(groups, func(a, b group) int { return cmp.Compare(len(a.msgs), len(b.msgs)) })
	require.Len(t, groups[1].msgs, 5, "the aggregate's messages in one delivery")
	now := time.Now()
	// Stale copies of the unordered message fill the finalize up to two
	// short of finalizeMost: they change nothing.
	stale := result{msg: groups[0].msgs[0], outcome: outcomeDelivered, started: now, finished: now}
	stale.msg.LeaseVersion--
	w := newWorker(d, "w")
	w.done = append(w.done, deliveriesOf(stale, finalizeMost-2)...)
	for _, m := range groups[1].msgs {
		w.done = append(w.done, result{msg: m, outcome: outcomeDelivered, started: now, finished: now, delivery: 1})
	}

	w.startFinalize()
	require.Empty(t, w.done, "the aggregate's five results in the same finalize")
	o := <-w.finalized
	require.NoError(t, o.err)
	w.applyFinalize(o)
	require.Equal(t, 5, countWhere(t, pool, "state = 'delivered' AND aggregate_id = '1'"))
	again, err := d.claim(ctx, "w", 10, nil)
	require.NoError(t, err)
	require.Empty(t, again, "nothing left to lease again")

	// Results of an earlier lease of an aggregate (run out while they
	// waited for their finalize) followed by the next lease's: the batch
	// ends with the earlier lease's, and the next lease's apply in the
	// next finalize, under their own lease.
	for range 3 {
		enqueue(t, pool, Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: "2", Payload: []byte(`{}`)})
	}
	groups, err = d.claim(ctx, "w", 10, nil)
	require.NoError(t, err)
	require.Len(t, groups, 1)
	require.Len(t, groups[0].msgs, 3)
	w.done = append(w.done, deliveriesOf(stale, finalizeMost-2)...)
	for _, m := range groups[0].msgs[:2] {
		earlier := result{msg: m, outcome: outcomeDelivered, started: now, finished: now, delivery: 2}
		earlier.msg.AggregateLeaseVersion--
		w.done = append(w.done, earlier)
	}
	for _, m := range groups[0].msgs {
		w.done = append(w.done, result{msg: m, outcome: outcomeDelivered, started: now, finished: now, delivery: 3})
	}
	w.startFinalize()
	require.Len(t, w.done, 3, "the next lease's results wait for the next finalize")
	w.applyFinalize(<-w.finalized)
	require.True(t, w.finalizing, "the outcome starts the next finalize")
	w.applyFinalize(<-w.finalized)
	require.Equal(t, 3, countWhere(t, pool, "state = 'delivered' AND aggregate_id = '2'"))
}

// A finalize takes an unordered delivery's results whole too, past
// finalizeMost: a claim of 32 deliveries of 32 messages is one finalize
// of 1,024, not 1,000 and then a statement of 24.
func TestAFinalizeTakesAnUnorderedDeliveryWhole(t *testing.T) {
	t.Parallel()
	pool := setup(t, "alpha")
	d, groups := claimedApart(t, pool, 5)
	// One delivery of the five, as a destination's known pace groups them.
	var g group
	for _, claimed := range groups {
		g.msgs = append(g.msgs, claimed.msgs...)
	}
	w := newWorker(d, "w")
	w.flights[7] = &flight{g: g, cancel: func() {}}
	w.held["alpha"]++
	now := time.Now()
	stale := result{msg: g.msgs[0], outcome: outcomeDelivered, started: now, finished: now}
	stale.msg.LeaseVersion--
	w.done = append(w.done, deliveriesOf(stale, finalizeMost-2)...)
	results := make([]result, len(g.msgs))
	for i, m := range g.msgs {
		results[i] = result{msg: m, outcome: outcomeDelivered, started: now, finished: now}
	}

	w.finished(landed{id: 7, results: results})
	require.Empty(t, w.done, "the delivery's five results in the same finalize")
	o := <-w.finalized
	require.NoError(t, o.err)
	require.Len(t, o.results, finalizeMost+3)
	w.applyFinalize(o)
	require.Equal(t, 5, countWhere(t, pool, "state = 'delivered'"))
}

// The flush is timed from the first finished delivery that waits for
// it, not pushed back by those that land after it, and not set at all
// while nothing waits: an idle worker does not wake for it. The results
// an enqueuing transaction held back wait for a flush of their own.
func TestTheFlushWaitsFromTheFirstFinishedDelivery(t *testing.T) {
	t.Parallel()
	pool := setup(t, "alpha")
	d, groups := claimedApart(t, pool, 3)
	w := inFlight(d, groups)
	land := func(id int) {
		now := time.Now()
		w.finished(landed{id: uint64(id), results: []result{{msg: groups[id].msgs[0], outcome: outcomeDelivered, started: now, finished: now}}})
	}
	require.True(t, w.flushAt.IsZero(), "nothing waits")

	land(0)
	first := w.flushAt
	require.False(t, first.IsZero(), "the first delivery that waits sets the flush")
	land(1)
	require.Equal(t, first, w.flushAt, "a later one does not push it back")
	testwait.For(t, 10*time.Second, "the flush", w.flushTimer.C)
	require.False(t, time.Now().Before(first), "not before its time")
	w.flush()
	require.Empty(t, w.done)
	require.True(t, w.flushAt.IsZero())

	// The last in flight lands while that finalize runs: it waits, with
	// a flush set, and the outcome finalizes it at once.
	land(2)
	require.Len(t, w.done, 1)
	require.False(t, w.flushAt.IsZero())
	o := <-w.finalized
	require.NoError(t, o.err)
	w.applyFinalize(o)
	require.Empty(t, w.done)
	require.True(t, w.flushAt.IsZero(), "nothing waits: the flush is stopped")
	o = <-w.finalized
	require.NoError(t, o.err)
	w.applyFinalize(o)
	require.Equal(t, 3, countWhere(t, pool, "state = 'delivered'"))
	select {
	case <-w.flushTimer.C:
		t.Fatal("a flush with nothing waiting")
	case <-time.After(4 * flushInterval):
	}

	// Held back by an enqueuing transaction: they wait for the next flush.
	now := time.Now()
	w.applyFinalize(finalizeOutcome{busy: []result{{msg: groups[2].msgs[0], outcome: outcomeDelivered, started: now, finished: now, delivery: 9}}})
	require.Len(t, w.done, 1)
	require.False(t, w.flushAt.IsZero(), "held-back results set the flush")
	testwait.For(t, 10*time.Second, "their flush", w.flushTimer.C)
}

// claimedApart enqueues n unordered messages to alpha and has a new
// dispatcher, with a no-op route there, claim them: a delivery each.
func claimedApart(t *testing.T, pool *pgxpool.Pool, n int) (*Dispatcher, []group) {
	t.Helper()
	for range n {
		enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)})
	}
	d := New(pool, Config{Logger: testlog.New(t), Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	groups, err := d.claim(context.Background(), "w", 10, nil)
	require.NoError(t, err)
	require.Len(t, groups, n, "one message per delivery")
	return d, groups
}

// inFlight is a new worker of d with groups in flight as flights 0, 1, ...
func inFlight(d *Dispatcher, groups []group) *worker {
	w := newWorker(d, "w")
	for id, g := range groups {
		w.flights[uint64(id)] = &flight{g: g, cancel: func() {}}
		w.held[g.msgs[0].Destination]++
	}
	return w
}

// deliveriesOf is n copies of r, each a delivery of its own (numbered from
// 1<<32, apart from the flights a test lands).
func deliveriesOf(r result, n int) []result {
	copies := make([]result, n)
	for i := range copies {
		copies[i] = r
		copies[i].delivery = 1<<32 + uint64(i)
	}
	return copies
}

// A finalize carries finalizeMost results at most: the rest wait for the
// next, which the outcome starts at once. A flush that comes while a
// finalize is in flight is not lost: the outcome starts the next
// finalize for what finished meanwhile, although deliveries are still in
// flight.
func TestFinalizesStayBoundedAndKeepTheirFlush(t *testing.T) {
	t.Parallel()
	pool := setup(t, "alpha")
	enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)})
	d := New(pool, Config{Logger: testlog.New(t), Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	groups, err := d.claim(context.Background(), "w", 10, nil)
	require.NoError(t, err)
	require.Len(t, groups, 1)
	now := time.Now()
	// A stale copy: its finalize changes nothing, whatever the count.
	stale := result{msg: groups[0].msgs[0], outcome: outcomeDelivered, started: now, finished: now}
	stale.msg.LeaseVersion--
	w := newWorker(d, "w")
	// nextStarted takes in the finalize in flight's outcome, which must
	// start the next for everything left, whose outcome starts none.
	nextStarted := func(why string) {
		w.applyFinalize(<-w.finalized)
		require.True(t, w.finalizing, why)
		require.Empty(t, w.done)
		w.applyFinalize(<-w.finalized)
		require.False(t, w.finalizing)
	}

	w.done = append(w.done, deliveriesOf(stale, finalizeMost+500)...)
	w.startFinalize()
	require.Len(t, w.done, 500, "one finalize carries finalizeMost")
	nextStarted("the rest at once: nothing else is in flight")

	w.flights[0] = &flight{g: groups[0], cancel: func() {}} // a delivery still in flight
	w.done = append(w.done, stale)
	w.flush()
	require.True(t, w.finalizing)
	w.done = append(w.done, stale) // landed meanwhile
	w.flush()                      // while the finalize is in flight
	require.Len(t, w.done, 1, "no second finalize in flight")
	nextStarted("the flush that came meanwhile starts the next finalize")
}

// A claim's deliveries start as each of its statements returns: those of
// the kind sent first never wait for the other kind's statement, which may
// find nothing. A worker sends the ordered claim first when its last claim
// found ordered messages only, and was not full.
func TestAClaimsDeliveriesStartAsEachStatementReturns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	d := New(pool, Config{Logger: testlog.New(t), LeaseDuration: time.Hour, IdlePoll: time.Hour,
		Routes: map[string]Route{"alpha": {Destination: acceptAll}}})
	// leases is what the database holds leased of the messages of topic
	// unordered and of aggregate ordered.
	leases := func(unordered, ordered string) [2]bool {
		t.Helper()
		var u, o bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT
			EXISTS (SELECT FROM switchyard.outbox WHERE topic = $1 AND lease_owner IS NOT NULL),
			EXISTS (SELECT FROM switchyard.outbox_aggregates WHERE aggregate_id = $2 AND lease_owner IS NOT NULL)`,
			unordered, ordered).Scan(&u, &o))
		return [2]bool{u, o}
	}
	// step is one call of claimRequest.leased: the kinds it was given, and
	// the leases held when it was called.
	type step struct {
		kinds  string
		leased [2]bool
	}
	claimBoth := func(n string, orderedFirst bool) []step {
		t.Helper()
		enqueue(t, pool, Message{Topic: "u" + n, Destination: "alpha", Payload: []byte(`{}`)},
			Message{Topic: "o" + n, Destination: "alpha", AggregateType: "order", AggregateID: n, Payload: []byte(`{}`)})
		var steps []step
		groups, _, err := d.claimPaced(ctx, claimRequest{worker: "w", limit: 10, orderedFirst: orderedFirst,
			leased: func(groups []group) {
				kinds := ""
				for _, g := range groups {
					kinds += map[bool]string{true: "unordered ", false: "ordered "}[g.msgs[0].AggregateID == ""]
				}
				steps = append(steps, step{kinds: kinds, leased: leases("u"+n, n)})
			}})
		require.NoError(t, err)
		require.Len(t, groups, 2)
		return steps
	}
	require.Equal(t, []step{{"unordered ", [2]bool{true, false}}, {"ordered ", [2]bool{true, true}}}, claimBoth("1", false),
		"the unordered message's delivery was handed over before the ordered claim was sent")
	require.Equal(t, []step{{"ordered ", [2]bool{false, true}}, {"unordered ", [2]bool{true, true}}}, claimBoth("2", true),
		"ordered first: the aggregate's delivery was handed over before the unordered claim was sent")

	w := newWorker(d, "w")
	enqueue(t, pool, Message{Topic: "o3", Destination: "alpha", AggregateType: "order", AggregateID: "3", Payload: []byte(`{}`)})
	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 1)
	require.True(t, w.orderedFirst, "a claim that found ordered messages only: the next asks for them first")
	landAll(w)
	enqueue(t, pool, Message{Topic: "u4", Destination: "alpha", Payload: []byte(`{}`)})
	w.nextClaim = time.Time{}
	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 1)
	require.False(t, w.orderedFirst, "a claim that found unordered messages: they come first again")
	landAll(w)

	// A full claim (a backlog) of aggregates alone: unordered first, so
	// that the ordered claim gets all the room in the second statement.
	small := New(pool, Config{Logger: testlog.New(t), LeaseDuration: time.Hour, IdlePoll: time.Hour, BatchSize: 2,
		Routes: map[string]Route{"alpha": {Destination: acceptAll}}})
	w = newWorker(small, "w")
	enqueue(t, pool, Message{Topic: "o5", Destination: "alpha", AggregateType: "order", AggregateID: "5", Payload: []byte(`{}`)},
		Message{Topic: "o6", Destination: "alpha", AggregateType: "order", AggregateID: "6", Payload: []byte(`{}`)})
	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 2)
	require.False(t, w.orderedFirst, "a full claim leaves unordered messages first")
	landAll(w)
}

// A worker claims again only when something may be due: after a claim
// that came back full (it wakes another worker too), a wake-up, or a
// finalize that says messages are due at once because of it (an
// aggregate it moved on has more, enqueued while it was leased; a message
// given back without a delay). A claim that came back short holds it off
// until then, or until the idle poll: claiming again at once found
// nothing almost every time.
func TestAWorkerClaimsAgainOnlyWhenSomethingMayBeDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	d := New(pool, Config{Logger: testlog.New(t), BatchSize: 2, IdlePoll: time.Hour, Routes: map[string]Route{"alpha": {Destination: acceptAll}}})
	w := newWorker(d, "w")
	holdsOff := func() bool { return w.nextClaim.After(time.Now()) }
	ordered := Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: "1", Payload: []byte(`{}`)}

	enqueue(t, pool, ordered)
	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 1)
	require.True(t, holdsOff(), "a claim that came back short holds the worker off")
	enqueue(t, pool, ordered) // while the aggregate is leased
	landAll(w)
	require.Equal(t, 1, countWhere(t, pool, "state = 'pending'"), "the second message waits")
	require.False(t, holdsOff(), "the finalize said the aggregate has more, due at once")

	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 1, "the aggregate's second message")
	landAll(w)
	require.Zero(t, countWhere(t, pool, "state = 'pending'"))
	require.True(t, holdsOff(), "a finalize with nothing more due leaves the worker held off")

	enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)}, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)})
	w.nextClaim = time.Time{} // as a wake-up does
	clear(w.pace)             // one message per delivery, as at the start
	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 2, "a full claim")
	require.False(t, holdsOff(), "a full claim does not hold the worker off")
	require.Len(t, d.wake, 1, "and wakes another worker: there may be more")
	landAll(w)

	unordered := Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)}
	enqueue(t, pool, unordered, unordered)
	groups, err := d.claim(ctx, "w", 10, nil)
	require.NoError(t, err)
	require.Len(t, groups, 2)
	giveBack := func(g group, delay time.Duration) bool {
		now := time.Now()
		_, moreDue, err := d.finalize(ctx, "w", []result{{msg: g.msgs[0], outcome: outcomeReleased, retryDelay: delay, started: now, finished: now}})
		require.NoError(t, err)
		return moreDue
	}
	require.False(t, giveBack(groups[0], time.Hour), "a message given back for an hour is not due")
	require.True(t, giveBack(groups[1], 0), "one given back without a delay is")
}

// A claim that stopped at a destination's share (claimable), or left it
// out for the deliveries the worker holds there, holds the worker off like
// any claim that was not full, but the finalize of deliveries that land
// lets it claim that destination's next messages at once.
func TestAWorkerAtADestinationsShareClaimsAgainWhenItsDeliveriesLand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "narrow", "wide")
	g, err := guard.New("narrow", guard.Config{Concurrency: 2}, nil) // a share of 4 deliveries
	require.NoError(t, err)
	d := New(pool, Config{Logger: testlog.New(t), BatchSize: 10, IdlePoll: time.Hour, Routes: map[string]Route{
		"narrow": {Destination: acceptAll, Guard: g}, "wide": {Destination: acceptAll}}})
	w := newWorker(d, "w")
	holdsOff := func() bool { return w.nextClaim.After(time.Now()) }
	t.Cleanup(func() { landAll(w) })
	for range 8 {
		enqueue(t, pool, Message{Topic: "t", Destination: "narrow", Payload: []byte(`{}`)})
	}

	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 4, "the destination's share")
	require.True(t, holdsOff(), "not full: held off")
	w.finished(<-w.results)
	w.finalizeAll() // as the flush does, and waits for it
	require.False(t, holdsOff(), "a delivery landed where the claim was capped")

	enqueue(t, pool, Message{Topic: "t", Destination: "wide", Payload: []byte(`{}`)})
	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 4, "wide's message; narrow left out, three of its four still held")
	require.True(t, holdsOff())
	landAll(w)
	require.Equal(t, 4, countWhere(t, pool, "state = 'pending'"))
	require.False(t, holdsOff(), "deliveries landed at the destination left out")
	clear(w.pace) // one message per delivery, as at the start
	w.claimIfRoom(ctx, ctx)
	require.Len(t, w.flights, 4, "narrow's next four")
}

// A destination that keeps up fast (two deliveries in a row went through
// at 5 ms a message or less since its last failure) may fill half the
// worker's window with aggregates, whatever its bulkhead: under offered
// load each aggregate brings a message or two to a claim, and twice the
// bulkhead's aggregates a claim were too few to keep up. Its unordered
// messages keep twice the bulkhead (their deliveries grow with the pace
// instead), and so does a rate-limited destination, whose fast pace may
// only mean unspent burst. The pace comes from deliveries landing
// (worker.clock), as in a running worker.
func TestAFastDestinationsAggregatesMayFillHalfTheWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "narrow", "limited")
	narrow, err := guard.New("narrow", guard.Config{Concurrency: 2}, nil) // a share of 4 deliveries
	require.NoError(t, err)
	limited, err := guard.New("limited", guard.Config{Concurrency: 2, Rate: 1000, Burst: 10}, nil) // also 4
	require.NoError(t, err)
	d := New(pool, Config{Logger: testlog.New(t), BatchSize: 20, IdlePoll: time.Hour, Routes: map[string]Route{
		"narrow": {Destination: acceptAll, Guard: narrow}, "limited": {Destination: acceptAll, Guard: limited}}})
	landing := func(name, outcome string, elapsed time.Duration) landed {
		msg := claimedMessage{OutboxClaimUnorderedRow: queries.OutboxClaimUnorderedRow{Destination: name}}
		return landed{results: []result{{msg: msg, outcome: outcome}}, elapsed: elapsed}
	}
	fast := func(name string) landed { return landing(name, outcomeDelivered, time.Millisecond) }
	slow := landing("narrow", outcomeDelivered, 15*time.Millisecond)
	for _, c := range []struct {
		name          string
		destination   string
		aggregates    bool     // 30 messages in 30 aggregates
		unordered     bool     // 30 unordered messages
		landings      []landed // before the claim, in order
		want          int      // deliveries claimed
		wantUnordered int      // of them, of unordered messages
	}{
		{"pace not known", "narrow", true, false, nil, 4, 0},
		{"slow", "narrow", true, false, []landed{slow, slow}, 4, 0},
		{"fast once", "narrow", true, false, []landed{fast("narrow")}, 4, 0},
		{"fast twice", "narrow", true, false, []landed{fast("narrow"), fast("narrow")}, 10, 0},
		{"fast twice, then a failure", "narrow", true, false, []landed{fast("narrow"), fast("narrow"), landing("narrow", outcomeRetry, time.Millisecond)}, 4, 0},
		{"fast twice, rate-limited", "limited", true, false, []landed{fast("limited"), fast("limited")}, 4, 0},
		{"fast twice, unordered", "narrow", false, true, []landed{fast("narrow"), fast("narrow")}, 4, 4},
		// The unordered statement first: its share, then aggregates up to
		// theirs, the unordered deliveries counted against it.
		{"fast twice, both kinds", "narrow", true, true, []landed{fast("narrow"), fast("narrow")}, 10, 4},
	} {
		for i := range 30 {
			if c.aggregates {
				enqueue(t, pool, Message{Topic: "t", Destination: c.destination, AggregateType: "order", AggregateID: strconv.Itoa(i), Payload: []byte(`{}`)})
			}
			if c.unordered {
				enqueue(t, pool, Message{Topic: "t", Destination: c.destination, Payload: []byte(`{}`)})
			}
		}
		w := newWorker(d, "w")
		for _, l := range c.landings {
			w.clock(l)
		}
		w.claimIfRoom(ctx, ctx)
		require.Len(t, w.flights, c.want, c.name)
		unordered := 0
		for _, f := range w.flights {
			if f.g.msgs[0].AggregateID == "" {
				unordered++
			}
		}
		require.Equal(t, c.wantUnordered, unordered, c.name)
		landAll(w)
		_, err := pool.Exec(ctx, "DELETE FROM switchyard.outbox")
		require.NoError(t, err)
	}
}

// A finalize that makes messages due while its worker has no room to
// claim them wakes another worker; with room, the worker claims them
// itself and wakes no one. Either way the worker claims once it has room.
func TestAFinalizeThatMakesMessagesDueWakesAWorkerWithRoom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	d := New(pool, Config{Logger: testlog.New(t), BatchSize: 2, IdlePoll: time.Hour, Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	ordered := func(aggregate string) Message {
		return Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: aggregate, Payload: []byte(`{}`)}
	}
	for _, full := range []bool{true, false} {
		aggregate := strconv.FormatBool(full)
		enqueue(t, pool, ordered(aggregate))
		groups, err := d.claim(ctx, "w", 10, nil)
		require.NoError(t, err)
		i := slices.IndexFunc(groups, func(g group) bool { return g.msgs[0].AggregateID == aggregate })
		require.GreaterOrEqual(t, i, 0, "the aggregate claimed")
		g := groups[i]
		enqueue(t, pool, ordered(aggregate)) // while the aggregate is leased
		w := newWorker(d, "w")
		w.nextClaim = time.Now().Add(time.Hour)
		if full {
			for id := range uint64(2) {
				w.flights[id] = &flight{g: g, cancel: func() {}}
			}
		}
		now := time.Now()
		w.done = []result{{msg: g.msgs[0], outcome: outcomeDelivered, started: now, finished: now}}
		w.finalizeAll()
		require.Equal(t, full, len(d.wake) == 1, "full %v: another worker woken", full)
		require.True(t, w.nextClaim.IsZero(), "full %v: the worker itself claims too, once it has room", full)
		select {
		case <-d.wake:
		default:
		}
	}
}

// A worker claims and delivers while its finalize waits: the finalize
// runs beside the worker's loop (startFinalize), so one held up by a lock
// (here a transaction holding the delivered message's row) never holds
// back the next messages. Finalized on the loop, the second message
// waited for the finalize's timeout, a third of the lease.
func TestAWorkerDeliversWhileItsFinalizeWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	landedFirst, finishFirst := make(chan struct{}), make(chan struct{})
	secondDelivered := make(chan struct{}, 1)
	startDispatcher(t, pool, Config{Workers: 1, LeaseDuration: time.Minute, HeartbeatInterval: time.Hour, Routes: map[string]Route{
		"alpha": {Destination: destination.Func(func(_ context.Context, d destination.Delivery) (destination.Outcome, error) {
			if d.Topic == "first" {
				close(landedFirst) // once: its lease (a minute) outlasts the test
				<-finishFirst
				return destination.Outcome{}, nil
			}
			select {
			case secondDelivered <- struct{}{}:
			default: // seen already
			}
			return destination.Outcome{}, nil
		})}}})
	enqueue(t, pool, Message{Topic: "first", Destination: "alpha", Payload: []byte(`{}`)})
	testwait.For(t, 10*time.Second, "the first message delivered", landedFirst)
	// Leased and being delivered: its finalize will wait for this lock.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var leased bool
	require.NoError(t, tx.QueryRow(ctx, `SELECT lease_owner IS NOT NULL FROM switchyard.outbox WHERE topic = 'first' FOR UPDATE`).Scan(&leased))
	require.True(t, leased)
	close(finishFirst)
	testwait.Until(t, 10*time.Second, "the finalize waiting for the lock", func() bool {
		var waiting int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()
			  AND wait_event_type = 'Lock' AND query LIKE '%OutboxFinalize%'`).Scan(&waiting))
		return waiting == 1
	})

	enqueue(t, pool, Message{Topic: "second", Destination: "alpha", Payload: []byte(`{}`)})
	testwait.For(t, 10*time.Second, "the second message delivered while the first one's finalize waits", secondDelivered)
	require.Equal(t, 1, countWhereIn(t, tx, "topic = 'first' AND state = 'pending'"), "the first one's finalize still waits")

	require.NoError(t, tx.Rollback(ctx))
	testwait.Until(t, 10*time.Second, "both finalized", func() bool {
		return countWhere(t, pool, "state = 'delivered'") == 2
	})
}

// acceptAll is a destination that accepts every delivery at once.
var acceptAll = destination.Func(func(context.Context, destination.Delivery) (destination.Outcome, error) {
	return destination.Outcome{}, nil
})

// landAll waits for w's deliveries in flight to land, as its loop does,
// and for their finalize: the last one to land is finalized at once.
func landAll(w *worker) {
	for len(w.flights) > 0 {
		w.finished(<-w.results)
	}
	w.finalizeAll()
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
