package outbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An ordered message is listed among its aggregate's messages
// (outbox_aggregate_messages, migration 00028) from its enqueue, by
// single insert and by COPY alike, an unordered one never; its delivery
// leaves the list as it was, and retention removes its entry with it.
func TestAggregateMessagesFollowEnqueueAndRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "r")
	enqueue(t, pool,
		Message{Topic: "t", Destination: "r", AggregateType: "order", AggregateID: "a", Payload: []byte(`{"n":0}`)},
		Message{Topic: "t", Destination: "r", Payload: []byte(`{"n":1}`)})
	var batch []Message
	for i := range copyThreshold {
		batch = append(batch, Message{Topic: "t", Destination: "r", AggregateType: "order", AggregateID: fmt.Sprint("b", i%2),
			Payload: fmt.Appendf(nil, `{"n":%d}`, 2+i)})
	}
	enqueue(t, pool, batch...)

	// members lists the entries as "type/id:message", and checks each
	// names an ordered message of the outbox with that aggregate.
	members := func() map[string]int {
		t.Helper()
		var orphans int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox_aggregate_messages m
			WHERE NOT EXISTS (SELECT FROM switchyard.outbox o WHERE o.id = m.message_id
				AND o.aggregate_type = m.aggregate_type AND o.aggregate_id = m.aggregate_id)`).Scan(&orphans))
		require.Zero(t, orphans, "an entry without its message")
		rows, err := pool.Query(ctx, `SELECT aggregate_type || '/' || aggregate_id, count(*) FROM switchyard.outbox_aggregate_messages GROUP BY 1`)
		require.NoError(t, err)
		defer rows.Close()
		out := map[string]int{}
		for rows.Next() {
			var k string
			var n int
			require.NoError(t, rows.Scan(&k, &n))
			out[k] = n
		}
		require.NoError(t, rows.Err())
		return out
	}
	half := copyThreshold / 2
	require.Equal(t, map[string]int{"order/a": 1, "order/b0": half, "order/b1": half}, members())

	// Delivered: n 0 and the first ten of the batch long ago, the rest now.
	_, err := pool.Exec(ctx, `
		UPDATE switchyard.outbox SET state = 'delivered', finished_at = now() - interval '30 days' WHERE (payload->>'n')::int < 12;
		UPDATE switchyard.outbox SET state = 'delivered', finished_at = now() WHERE (payload->>'n')::int >= 12;`)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"order/a": 1, "order/b0": half, "order/b1": half}, members())

	pruned, err := Prune(ctx, pool, Retention{}, time.Now())
	require.NoError(t, err)
	require.Equal(t, int64(12), pruned.Delivered) // n 0, n 1 (unordered) and n 2-11
	require.Equal(t, map[string]int{"order/b0": half - 5, "order/b1": half - 5}, members())
}
