package registry

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/testwait"
)

// An aggregate whose head failed while its destination failed drains soon
// after the destination delivers again, although the head's backoff drew
// close to its 60 s ceiling: the head is retried within HeadWait, and its
// queue follows in order. Without that the queue would wait the whole
// minute.
func TestWaitingHeadIsRetriedSoonAfterTheDestinationRecovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)

	var failing atomic.Bool
	failing.Store(true)
	var mu sync.Mutex
	var order []int
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		var body struct {
			Seq int `json:"seq"`
		}
		if json.NewDecoder(r.Body).Decode(&body) == nil && body.Seq > 0 {
			mu.Lock()
			order = append(order, body.Seq)
			mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	_, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations
		(name, kind, address, secret_ref, retry_base_ms, retry_cap_ms, max_attempts, breaker_min_requests)
		VALUES ('recovering', 'webhook', $1, 'TEST_SECRET', 60000, 60000, 12, 100000)`, receiver.URL)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, payload)
		SELECT 'order.changed', 'recovering', 'order', 'o-1', jsonb_build_object('seq', s) FROM generate_series(1, 5) s`)
	require.NoError(t, err)

	reg := New(pool, Config{Owner: "head-wait", Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
		ShareInterval: 100 * time.Millisecond, HeadWait: time.Second,
		Getenv: func(string) string { return testSecret }})
	t.Cleanup(reg.Close)
	routes, _, err := reg.Sync(ctx)
	require.NoError(t, err)
	d := outbox.New(pool, outbox.Config{Routes: routes, Workers: 2, IdlePoll: 10 * time.Millisecond,
		Random: func() float64 { return 0.99 }}) // every backoff close to its ceiling
	require.NoError(t, d.Start(ctx))
	t.Cleanup(d.Stop)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); reg.Watch(watchCtx, d.SetRoutes) }()
	t.Cleanup(func() { stopWatch(); <-watched })

	testwait.Until(t, 30*time.Second, "the head's first attempt failed", func() bool {
		return count(t, pool, `aggregate_id = 'o-1' AND aggregate_seq = 1 AND attempts = 1 AND state = 'pending' AND last_error IS NOT NULL`) == 1
	})
	failing.Store(false)
	recovered := time.Now()
	// Unordered traffic to the same destination shows it delivers again.
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload)
		SELECT 'ping', 'recovering', '{}' FROM generate_series(1, 20)`)
	require.NoError(t, err)
	testwait.Until(t, 40*time.Second, "the aggregate drained", func() bool {
		return count(t, pool, `aggregate_id = 'o-1' AND state = 'delivered'`) == 5
	})
	drain := time.Since(recovered)
	t.Logf("the aggregate drained %v after the destination recovered (its head's backoff was ~59 s)", drain.Round(time.Millisecond))
	assert.Less(t, drain, 40*time.Second, "well before the head's ~59 s backoff (the margin is for a loaded test machine)")
	mu.Lock()
	defer mu.Unlock()
	assert.True(t, slices.IsSorted(order), "delivered in order: %v", order)
	assert.Len(t, order, 5)
}
