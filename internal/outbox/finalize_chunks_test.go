package outbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/testlog"
)

// chunkedResult is a result of message id: of aggregate "" (unordered) or
// of the aggregate named, from the worker's delivery.
func chunkedResult(id int64, aggregate string, delivery uint64) result {
	m := claimedMessage{OutboxClaimUnorderedRow: queries.OutboxClaimUnorderedRow{ID: id, Destination: "alpha", AggregateID: aggregate}}
	if aggregate != "" {
		m.AggregateType = "order"
	}
	return result{msg: m, delivery: delivery}
}

// A finalize of more than genericPlanMost messages is split into
// statements of at most that many, each aggregate's results and each
// unordered delivery's whole in one of them, and every dead result in one
// of them, in the order they first appear; one that cannot be split so,
// or would take more than genericChunksMost statements, is not split
// (nil: planned for its arguments).
func TestAFinalizeIsSplitIntoWholesOfItsGenericPlansSize(t *testing.T) {
	t.Parallel()
	// deliveries are n unordered messages, one delivery each, from id.
	deliveries := func(id int64, n int) []result {
		out := make([]result, n)
		for i := range out {
			out[i] = chunkedResult(id+int64(i), "", uint64(id)+uint64(i))
		}
		return out
	}
	// aggregate is n messages of one aggregate, from id.
	aggregate := func(name string, id int64, n int) []result {
		out := make([]result, n)
		for i := range out {
			out[i] = chunkedResult(id+int64(i), name, uint64(id))
		}
		return out
	}
	ids := func(chunks [][]result) [][]int64 {
		if chunks == nil {
			return nil
		}
		out := make([][]int64, len(chunks))
		for i, chunk := range chunks {
			out[i] = []int64{}
			for _, r := range chunk {
				out[i] = append(out[i], r.msg.ID)
			}
		}
		return out
	}
	span := func(from, n int64) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = from + int64(i)
		}
		return out
	}
	// interleaved is aggregate a's 20 messages with b's 20, one by one.
	a, b := aggregate("a", 100, 20), aggregate("b", 200, 20)
	var interleaved []result
	for i := range a {
		interleaved = append(interleaved, a[i], b[i])
	}
	// twoDead is 40 deliveries, of which 5 and 35 went dead.
	twoDead := deliveries(1, 40)
	twoDead[4].outcome, twoDead[34].outcome = outcomeDead, outcomeDead
	// sameDelivery is 33 unordered messages of one delivery.
	sameDelivery := deliveries(1, 33)
	for i := range sameDelivery {
		sameDelivery[i].delivery = 7
	}
	tests := []struct {
		name    string
		results []result
		want    [][]int64
	}{
		{"small: as it is", deliveries(1, genericPlanMost), [][]int64{span(1, genericPlanMost)}},
		{"unordered deliveries", deliveries(1, 40), [][]int64{span(1, 32), span(33, 8)}},
		{"the most statements", deliveries(1, genericChunksMost*genericPlanMost),
			[][]int64{span(1, 32), span(33, 32), span(65, 32), span(97, 32)}},
		{"one message more", deliveries(1, genericChunksMost*genericPlanMost+1), nil},
		{"aggregates whole", append(aggregate("a", 100, 20), aggregate("b", 200, 20)...), [][]int64{span(100, 20), span(200, 20)}},
		{"an aggregate's results gathered", interleaved, [][]int64{span(100, 20), span(200, 20)}},
		{"an aggregate and deliveries", append(aggregate("a", 100, 20), deliveries(1, 20)...),
			[][]int64{append(span(100, 20), span(1, 12)...), span(13, 8)}},
		{"an aggregate larger than a statement", append(aggregate("a", 100, 33), deliveries(1, 3)...), nil},
		{"a delivery larger than a statement", sameDelivery, nil},
		{"the dead results together", twoDead, [][]int64{append(append(span(1, 5), 35), span(6, 26)...), append(span(32, 3), span(36, 5)...)}},
		{"more statements than the most", append(append(aggregate("a", 100, 20), aggregate("b", 200, 20)...),
			append(aggregate("c", 300, 20), append(aggregate("d", 400, 20), aggregate("e", 500, 20)...)...)...), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, ids(genericChunks(tt.results)))
		})
	}
}

// A finalize split into statements (genericChunks) is one transaction in
// one round trip, every statement on the prepared statement's generic
// plan: all of it applied, the aggregates moved on, and nothing planned
// for its arguments. One that the server refuses in its last statement
// changes nothing.
func TestASplitFinalizeIsOneTransactionOnGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared := setup(t, "alpha")
	pool, trips := tracedSessionPool(t, shared)
	registry := prometheus.NewRegistry()
	d := newDispatcher(t, pool, Config{Logger: testlog.New(t), LeaseDuration: time.Hour, AggregateBatch: 32, Metrics: NewMetrics(registry),
		Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	// Three aggregates of 20 messages and 30 unordered ones: 90 messages,
	// three statements at least.
	var msgs []Message
	for a := range 3 {
		for range 20 {
			msgs = append(msgs, Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: fmt.Sprint(a), Payload: []byte(`{}`)})
		}
	}
	for range 30 {
		msgs = append(msgs, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)})
	}
	enqueue(t, shared, msgs...)
	groups, err := d.claim(ctx, "w", 100, nil)
	require.NoError(t, err)
	// Aggregate 0 first, so that its results are the first statement's.
	slices.SortStableFunc(groups, func(a, b group) int {
		return cmp.Compare(cmp.Or(a.msgs[0].AggregateID, "~"), cmp.Or(b.msgs[0].AggregateID, "~"))
	})
	var results []result
	for i, g := range groups {
		now := time.Now()
		for _, m := range g.msgs {
			results = append(results, result{msg: m, outcome: outcomeDelivered, started: now, finished: now, delivery: uint64(i)})
		}
	}
	require.Len(t, results, len(msgs))
	chunks := genericChunks(results)
	require.GreaterOrEqual(t, len(chunks), 3)

	// Refused: the last statement's error text holds a NUL, which
	// PostgreSQL's text cannot.
	last := chunks[len(chunks)-1]
	refused := last[len(last)-1].msg.ID
	for i := range results {
		if results[i].msg.ID == refused {
			results[i].outcome, results[i].err, results[i].retryDelay = outcomeRetry, "refused\x00", time.Hour
		}
	}
	trips.Reset()
	_, _, err = d.finalize(ctx, "w", results)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "refused by the server")
	require.Equal(t, [2]int64{0, 1}, [2]int64{trips.Statements(), trips.Pipelines()}, "sent, as one pipeline")
	require.Zero(t, countWhere(t, shared, "state <> 'pending'"), "no statement of the transaction applied")
	require.Equal(t, 3, countWhere(t, shared, "state = 'pending' AND lease_owner = 'w' AND aggregate_id <> ''"), "the aggregates' heads as the claim left them")

	for i := range results {
		if results[i].msg.ID == refused {
			results[i].outcome, results[i].err, results[i].retryDelay = outcomeDelivered, "", 0
		}
	}
	// Aggregate 0's row held by another transaction (an enqueue, say):
	// the first statement leaves its results for a later finalize (busy),
	// the others apply.
	holder, err := shared.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `SELECT FROM switchyard.outbox_aggregates WHERE aggregate_id = '0' FOR UPDATE`)
	require.NoError(t, err)
	trips.Reset()
	busy, moreDue, err := d.finalize(ctx, "w", results)
	require.NoError(t, err)
	require.Len(t, busy, 20, "aggregate 0's results")
	for _, r := range busy {
		require.Equal(t, "0", r.msg.AggregateID)
	}
	require.False(t, moreDue, "every other aggregate's messages were delivered")
	require.Equal(t, [2]int64{0, 1}, [2]int64{trips.Statements(), trips.Pipelines()}, "one pipeline, no statement on its own")
	require.Equal(t, len(msgs)-20, countWhere(t, shared, "state = 'delivered'"))
	require.NoError(t, holder.Rollback(ctx))
	busy, moreDue, err = d.finalize(ctx, "w", busy)
	require.NoError(t, err)
	require.Empty(t, busy)
	require.False(t, moreDue)
	require.Equal(t, len(msgs), countWhere(t, shared, "state = 'delivered'"))
	// Every statement's rows were read: each outcome counted as applied,
	// none as stale.
	require.Equal(t, float64(len(msgs)), counted(t, registry, "switchyard_outbox_outcomes_total"))
	require.Zero(t, counted(t, registry, "switchyard_outbox_stale_finalizes_total"))
	var movedOn int
	require.NoError(t, shared.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox_aggregates
		WHERE done_seq = last_seq AND last_seq = 20 AND lease_owner IS NULL`).Scan(&movedOn))
	require.Equal(t, 3, movedOn, "each aggregate moved on past its 20 messages")
	statements, generic, custom := preparedStatements(t, pool, "OutboxFinalize")
	require.Equal(t, 1, statements, "one prepared statement")
	// The session is new: the pool closed the one the refused finalize
	// left in a failed transaction.
	require.Equal(t, len(chunks)+1, generic+custom, "every statement of both finalizes ran from it (the second, aggregate 0's alone, one)")
	require.Zero(t, custom, "on its generic plan")
	require.True(t, idle(t, pool), "no transaction left open")
}

// counted is the sum of a counter's values over its labels in registry.
func counted(t *testing.T, registry *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := registry.Gather()
	require.NoError(t, err)
	var sum float64
	for _, family := range families {
		if family.GetName() == name {
			for _, m := range family.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
