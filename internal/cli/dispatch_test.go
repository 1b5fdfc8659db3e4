package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/destination/webhook"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/testwait"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// sink is a webhook receiver that can hold requests open, to keep
// deliveries in flight while a dispatcher is killed.
type sink struct {
	mu       sync.Mutex
	received map[string]int // guarded by mu: verified deliveries per webhook-id
	held     chan struct{}  // closed to let held requests finish
	hold     bool           // guarded by mu
	arrived  chan struct{}  // receives once per request while holding
}

func newSink() *sink {
	return &sink{received: map[string]int{}, held: make(chan struct{}), hold: true, arrived: make(chan struct{}, 1024)}
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := webhook.Verify(testSecret, r.Header, body, time.Minute, time.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	hold := s.hold
	s.mu.Unlock()
	if hold {
		s.arrived <- struct{}{}
		<-s.held
		http.Error(w, "held", http.StatusServiceUnavailable)
		return
	}
	s.mu.Lock()
	s.received[r.Header.Get(webhook.HeaderID)]++
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *sink) release() {
	s.mu.Lock()
	s.hold = false
	s.mu.Unlock()
	close(s.held)
}

// sinkDatabase is a test database (its URL, and a pool on it) in which
// receiver, served, is the webhook destination 'sink' (retrying after 10
// to 100 ms, up to 100 attempts, so that no test waits for a backoff) and
// messages are enqueued to it. When the test ends a receiver still holding
// requests is released before its server closes (which waits for them).
func sinkDatabase(t *testing.T, receiver *sink, messages int) (string, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	server := httptest.NewServer(receiver)
	t.Cleanup(server.Close)
	t.Cleanup(func() {
		select {
		case <-receiver.held:
		default:
			receiver.release()
		}
	})
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address, secret_ref, retry_base_ms, retry_cap_ms, max_attempts)
		VALUES ('sink', 'webhook', $1, 'SINK_SECRET', 10, 100, 100)`, server.URL)
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var msgs []outbox.Message
		for i := range messages {
			msgs = append(msgs, outbox.Message{Topic: "order.created", Destination: "sink", Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
		}
		_, err := outbox.Enqueue(ctx, tx, msgs...)
		return err
	}))
	return url, pool
}

// A dispatcher killed with kill -9 in the middle of a batch loses nothing:
// its leases expire and another dispatcher delivers every message,
// counting the attempt the killed one may have made of each message it
// held (its stretches' first tries: internal/outbox, stretch.go).
func TestKilledDispatcherLosesNothing(t *testing.T) {
	t.Parallel()
	const messages = 200
	ctx := context.Background()
	receiver := newSink()
	url, pool := sinkDatabase(t, receiver, messages)

	env := []string{"DATABASE_URL=" + url, "SINK_SECRET=" + testSecret}
	first := startConsole(t, env, "dispatch", "--lease", "2s", "--workers", "2")
	select {
	case <-receiver.arrived: // a delivery is in flight
	case <-time.After(time.Minute):
		t.Fatalf("no delivery arrived: %s", first.Stderr())
	}
	first.Signal(t, syscall.SIGKILL)
	require.Equal(t, -1, first.WaitExit(t, 10*time.Second))
	var leased int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox o WHERE o.state = 'pending'
		AND (o.lease_owner IS NOT NULL OR EXISTS (SELECT FROM switchyard.outbox_stretches s WHERE o.id = ANY (s.ids)))`).Scan(&leased))
	require.Positive(t, leased, "the killed dispatcher held leases")
	receiver.release()

	second := startConsole(t, env, "dispatch", "--lease", "2s", "--workers", "2")
	testwait.Until(t, 2*time.Minute, "every message delivered (the console's log is above)", func() bool {
		var delivered int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox WHERE state = 'delivered'`).Scan(&delivered))
		return delivered == messages
	})
	receiver.mu.Lock()
	defer receiver.mu.Unlock()
	require.Len(t, receiver.received, messages, "every message reached the receiver")
	var counted, stretches int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM switchyard.outbox WHERE attempts >= 2),
		(SELECT count(*) FROM switchyard.outbox_stretches)`).Scan(&counted, &stretches))
	require.Positive(t, counted, "the attempts in flight when it was killed counted")
	require.Zero(t, stretches, "no lease left behind")
	second.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, second.WaitExit(t, 30*time.Second))
}

// console serve runs the dispatcher too, and /metrics shows its work; the
// change feed and the dispatcher hold one LISTEN connection together.
func TestServeDeliversAndExposesDispatcherMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	receiver := newSink()
	receiver.release()
	url, pool := sinkDatabase(t, receiver, 2)
	p := serveConsole(t, []string{"DATABASE_URL=" + url, "SINK_SECRET=" + testSecret})
	var body string
	testwait.Until(t, time.Minute, "two deliveries in the metrics (the console's log is above)", func() bool {
		var status int
		status, body = get(t, p.URL+"/metrics")
		require.Equal(t, 200, status)
		return strings.Contains(body, `switchyard_outbox_outcomes_total{destination="sink",outcome="delivered"} 2`)
	})
	require.Contains(t, body, `switchyard_outbox_breaker_state{destination="sink"} 0`)
	// The change feed and the dispatcher share the process's one LISTEN
	// connection (internal/pglisten). The pattern is split so that this
	// query's own text does not match it.
	testwait.Until(t, 10*time.Second, "one LISTEN connection for the whole process", func() bool {
		var listening int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE '%LISTEN' || ' switchyard%'`).Scan(&listening))
		return listening == 1
	})
	p.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, p.WaitExit(t, 30*time.Second))
}
