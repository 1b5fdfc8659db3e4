package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Invariant 1: the outbox row commits if and only if the business change does.
func TestEnqueueCommitsOnlyWithTheBusinessChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "billing")
	_, err := pool.Exec(ctx, "CREATE TABLE orders (id int PRIMARY KEY)")
	require.NoError(t, err)

	rollback := errors.New("business rule failed")
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES (1)"); err != nil {
			return err
		}
		if _, err := Enqueue(ctx, tx, Message{Topic: "order.created", Destination: "billing", Payload: []byte(`{"id":1}`)}); err != nil {
			return err
		}
		return rollback
	})
	require.ErrorIs(t, err, rollback)
	require.Zero(t, countWhere(t, pool, "true"), "a rolled-back business change leaves no outbox row")

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES (2)"); err != nil {
			return err
		}
		_, err := Enqueue(ctx, tx, Message{Topic: "order.created", Destination: "billing", Payload: []byte(`{"id":2}`)})
		return err
	})
	require.NoError(t, err)
	require.Equal(t, 1, countWhere(t, pool, "payload->>'id' = '2'"))
}

func TestEnqueueRejectsInvalidMessagesAndKeepsTheTransactionUsable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "billing")
	valid := Message{Topic: "t", Destination: "billing", Payload: []byte(`{}`)}
	for name, tc := range map[string]struct {
		msg  Message
		want string
	}{
		"bad json":            {Message{Topic: "t", Destination: "billing", Payload: []byte(`{"a":`)}, "not valid JSON"},
		"too large":           {Message{Topic: "t", Destination: "billing", Payload: []byte(`"` + strings.Repeat("x", MaxPayloadBytes) + `"`)}, "more than the"},
		"unknown destination": {Message{Topic: "t", Destination: "nowhere", Payload: []byte(`{}`)}, `unknown destination "nowhere"`},
		"no topic":            {Message{Destination: "billing", Payload: []byte(`{}`)}, "topic is empty"},
		"type without id":     {Message{Topic: "t", Destination: "billing", AggregateType: "order", Payload: []byte(`{}`)}, "aggregate type given without"},
	} {
		t.Run(name, func(t *testing.T) {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				// Beside a valid message, whose destination is checked before
				// anything is inserted, and alone, where each insert checks it.
				for _, batch := range [][]Message{{valid, tc.msg}, {tc.msg}, {tc.msg, tc.msg}} {
					_, err := Enqueue(ctx, tx, batch...)
					require.ErrorIs(t, err, ErrInvalid)
					require.ErrorContains(t, err, tc.want)
				}
				_, err := Enqueue(ctx, tx, valid) // the transaction still works
				return err
			})
			require.NoError(t, err)
		})
	}
	require.Equal(t, 5, countWhere(t, pool, "true"), "only the valid messages enqueued after each failure")
}

// A message written by hand (SQL, not Enqueue) to a destination that does
// not exist is refused with the foreign key's error, in every isolation
// level and through COPY, and so is an UPDATE that moves a message to one
// (checked after the update since migration 00031); a move to a
// destination that exists is not (migration 00022).
func TestHandWrittenSQLCannotNameAnUnknownDestination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "billing", "crm")
	requireUnknown := func(t *testing.T, err error) {
		t.Helper()
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "23503", pgErr.Code)
		require.Equal(t, `destination "nowhere" does not exist`, pgErr.Message)
	}
	enqueue(t, pool, Message{Topic: "t", Destination: "billing", Payload: []byte(`{}`)})
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable} {
		t.Run(string(iso), func(t *testing.T) {
			err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: iso}, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, aggregate_id, payload) VALUES ('t', 'nowhere', 'a', '{}')`)
				return err
			})
			requireUnknown(t, err)
			err = pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: iso}, func(tx pgx.Tx) error {
				_, err := tx.CopyFrom(ctx, pgx.Identifier{"switchyard", "outbox"}, []string{"topic", "destination", "payload"},
					pgx.CopyFromRows([][]any{{"t", "billing", "{}"}, {"t", "nowhere", "{}"}}))
				return err
			})
			requireUnknown(t, err)
			err = pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: iso}, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `UPDATE switchyard.outbox SET destination = 'nowhere'`)
				return err
			})
			requireUnknown(t, err)
		})
	}
	require.Equal(t, 1, countWhere(t, pool, "true"), "only the message enqueued before")
	require.Equal(t, 1, countWhere(t, pool, "destination = 'billing'"), "and it was not moved")
	var numbered int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox_aggregates`).Scan(&numbered))
	require.Zero(t, numbered, "nothing numbered for a refused message")

	_, err := pool.Exec(ctx, `UPDATE switchyard.outbox SET destination = 'nowhere'`)
	requireUnknown(t, err)
	_, err = pool.Exec(ctx, `UPDATE switchyard.outbox SET destination = 'crm'`)
	require.NoError(t, err)
	require.Equal(t, 1, countWhere(t, pool, "destination = 'crm'"))
}

// An UPDATE of messages' rows, such as every claim's and every
// finalize's, writes the update alone: PostgreSQL locks each row first,
// with a WAL record of its own, whenever the table has a BEFORE UPDATE row
// trigger, even one whose column list keeps it from firing (migration
// 00031). A HOT update of n rows writes about n records; with that lock,
// 2n.
func TestAnUpdateOfMessagesLocksNoRowFirst(t *testing.T) {
	t.Parallel()
	pool := setup(t, "billing")
	const n = 50
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{Topic: "t", Destination: "billing", Payload: []byte(`{}`)}
	}
	enqueue(t, pool, msgs...)
	records := walRecords(t, pool, `UPDATE switchyard.outbox SET lease_owner = 'test'`)
	require.Equal(t, n, countWhere(t, pool, "lease_owner = 'test'"), "every row updated")
	require.GreaterOrEqual(t, records, int64(n), "one record per row updated, at least")
	require.Less(t, records, int64(n+n/2), "a record per row for a lock before its update")
}

// walRecords is how many WAL records stmt wrote (EXPLAIN ANALYZE, WAL:
// its triggers' writes included), after running it.
func walRecords(t *testing.T, pool *pgxpool.Pool, stmt string) int64 {
	t.Helper()
	var text string
	require.NoError(t, pool.QueryRow(context.Background(), `EXPLAIN (ANALYZE, WAL, FORMAT JSON) `+stmt).Scan(&text))
	var plans []struct {
		Plan struct {
			WALRecords int64 `json:"WAL Records"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(text), &plans))
	require.Len(t, plans, 1)
	return plans[0].Plan.WALRecords
}

// What an ordered message numbered in an aggregate that has a row costs
// the enqueue in WAL beyond an unordered one: its membership row and the
// upsert of the aggregate's sequence, nothing more. Measured against as
// many unordered messages enqueued alike: the outbox's own row and index
// entries are the same for both kinds.
func TestAnOrderedEnqueueWritesItsMembershipAndSequenceOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "billing")
	const n = 50
	// insert enqueues n messages, the k-th of the aggregate that
	// aggregate (SQL of k) names.
	insert := func(aggregate string) string {
		return `INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload)
			SELECT 't', 'billing', ` + aggregate + `, '{}' FROM generate_series(1, ` + fmt.Sprint(n) + `) AS k`
	}
	const ordersByK, none = `'order', k::text`, `'', ''`
	// Each aggregate's first message, which creates its row.
	_, err := pool.Exec(ctx, insert(ordersByK))
	require.NoError(t, err)
	ordered := walRecords(t, pool, insert(ordersByK))
	unordered := walRecords(t, pool, insert(none))
	var numbered int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox WHERE aggregate_seq = 2`).Scan(&numbered))
	require.Equal(t, n, numbered, "every aggregate numbered its second message 2")
	// Per ordered message: the membership row and its key (2); the
	// upsert's lock of the aggregate's row (1: ON CONFLICT DO UPDATE locks
	// the row it finds before it updates it; a plain UPDATE first saved
	// that record but cost the enqueue more CPU under offered load:
	// BENCHMARKS.md, "The aggregate's sequence by UPDATE first"), then its
	// new row version and two index entries (3): never HOT, since last_seq
	// is in outbox_aggregates_due's predicate.
	perMessage := float64(ordered-unordered) / n
	require.InDelta(t, 6, perMessage, 0.5, "ordered %d, unordered %d WAL records for %d messages", ordered, unordered, n)
}

// The enqueue numbers an aggregate's messages one after another at every
// isolation level, a first message and the next ones (the upsert of the
// aggregate's sequence in the insert trigger).
func TestAnOrderedEnqueueNumbersItsMessagesAtEveryIsolationLevel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "billing")
	levels := []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable}
	for round := range 2 {
		for _, iso := range levels {
			err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: iso}, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload)
					VALUES ('t', 'billing', 'order', $1, '{}')`, string(iso))
				return err
			})
			require.NoError(t, err, "round %d, %s", round, iso)
		}
	}
	rows, err := pool.Query(ctx, `SELECT aggregate_id || ' ' || aggregate_seq FROM switchyard.outbox ORDER BY id`)
	require.NoError(t, err)
	numbered, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"read committed 1", "repeatable read 1", "serializable 1",
		"read committed 2", "repeatable read 2", "serializable 2"}, numbered)
}

// Enqueues of one aggregate at once, each in a transaction of its own
// that holds its number a while before it commits, number the aggregate's
// messages 1, 2, 3, ... with no gap or repeat, in the order of their
// commits: a message's number is taken only after the commit of the one
// numbered before it was sent (the aggregate's row lock, which the
// trigger's upsert takes and holds to commit). A first message of each
// aggregate races the others too (the upsert's insert).
func TestConcurrentEnqueuesNumberAnAggregateInCommitOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "billing")
	const writers, each, aggregates = 8, 15, 2
	type numbered struct {
		aggregate  string
		seq        int64
		numberedAt time.Time // the INSERT returned: the number taken
		commitAt   time.Time // the COMMIT about to be sent
	}
	results := make([][]numbered, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				aggregate := fmt.Sprint((w + i) % aggregates)
				var n numbered
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					if err := tx.QueryRow(ctx, `INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload)
						VALUES ('t', 'billing', 'order', $1, '{}') RETURNING aggregate_seq`, aggregate).Scan(&n.seq); err != nil {
						return err
					}
					n.aggregate, n.numberedAt = aggregate, time.Now()
					time.Sleep(time.Duration(i%3) * time.Millisecond) // hold the number a while
					n.commitAt = time.Now()
					return nil
				})
				if !assert.NoError(t, err) {
					return
				}
				results[w] = append(results[w], n)
			}
		})
	}
	wg.Wait()
	byAggregate := map[string][]numbered{}
	for _, rs := range results {
		for _, n := range rs {
			byAggregate[n.aggregate] = append(byAggregate[n.aggregate], n)
		}
	}
	require.Len(t, byAggregate, aggregates)
	total := 0
	for aggregate, ns := range byAggregate {
		slices.SortFunc(ns, func(a, b numbered) int { return cmp.Compare(a.seq, b.seq) })
		for i, n := range ns {
			require.Equal(t, int64(i+1), n.seq, "aggregate %s: numbered without a gap or a repeat", aggregate)
			if i > 0 {
				require.True(t, n.numberedAt.After(ns[i-1].commitAt),
					"aggregate %s: number %d taken before number %d's commit was sent", aggregate, n.seq, ns[i-1].seq)
			}
		}
		total += len(ns)
	}
	require.Equal(t, writers*each, total)
}

// A destination that a message names cannot be deleted or renamed by
// hand-written SQL either, as the foreign key refused it; without
// messages it can (migration 00022).
func TestHandWrittenSQLCannotRemoveANamedDestination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "billing", "crm")
	enqueue(t, pool, Message{Topic: "t", Destination: "billing", Payload: []byte(`{}`)})
	_, err := pool.Exec(ctx, `UPDATE switchyard.outbox SET state = 'delivered'`)
	require.NoError(t, err)
	for _, stmt := range []string{
		`DELETE FROM switchyard.destinations WHERE name = 'billing'`,
		`UPDATE switchyard.destinations SET name = 'billing-2' WHERE name = 'billing'`,
	} {
		_, err := pool.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, stmt)
		require.Equal(t, "23503", pgErr.Code, stmt)
		require.Equal(t, `destination "billing" is still named by messages`, pgErr.Message)
	}
	_, err = pool.Exec(ctx, `UPDATE switchyard.destinations SET address = 'elsewhere' WHERE name = 'billing'`)
	require.NoError(t, err, "a change that keeps the name")
	_, err = pool.Exec(ctx, `UPDATE switchyard.destinations SET name = 'crm-2' WHERE name = 'crm'`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `DELETE FROM switchyard.destinations WHERE name = 'crm-2'`)
	require.NoError(t, err)
}

// Large batches go through COPY; the trigger still numbers each aggregate.
func TestEnqueueBatchNumbersEachAggregateInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "billing")
	var msgs []Message
	for i := range 300 {
		msgs = append(msgs, Message{
			Topic: "order.updated", Destination: "billing", AggregateType: "order",
			AggregateID: fmt.Sprint(i % 3), Payload: fmt.Appendf(nil, `{"n":%d}`, i),
		})
	}
	enqueue(t, pool, msgs...)
	rows, err := pool.Query(ctx, `SELECT aggregate_id, aggregate_seq, (payload->>'n')::int FROM switchyard.outbox ORDER BY aggregate_id, aggregate_seq`)
	require.NoError(t, err)
	defer rows.Close()
	next := map[string]int64{}
	lastN := map[string]int{}
	n := 0
	for rows.Next() {
		var agg string
		var seq int64
		var payloadN int
		require.NoError(t, rows.Scan(&agg, &seq, &payloadN))
		next[agg]++
		require.Equal(t, next[agg], seq, "aggregate %s is numbered without gaps", agg)
		if prev, ok := lastN[agg]; ok {
			require.Greater(t, payloadN, prev, "aggregate %s keeps the caller's order", agg)
		}
		lastN[agg] = payloadN
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 300, n)
}
