package chaos

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The inbox sender's retries back off from 200 ms to 5 s, each pause
// between half and all of its bound.
func TestSendRetryBacksOff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attempt  int
		lo, high time.Duration
	}{
		{1, 100 * time.Millisecond, 200 * time.Millisecond},
		{2, 200 * time.Millisecond, 400 * time.Millisecond},
		{4, 800 * time.Millisecond, 1600 * time.Millisecond},
		{6, 2500 * time.Millisecond, 5 * time.Second},
		{60, 2500 * time.Millisecond, 5 * time.Second},
	} {
		require.Equal(t, tc.lo, sendRetry(tc.attempt, 0), "attempt %d, least", tc.attempt)
		got := sendRetry(tc.attempt, 0.999999)
		require.LessOrEqual(t, got, tc.high, "attempt %d, most", tc.attempt)
		require.Greater(t, got, tc.high*99/100, "attempt %d, most", tc.attempt)
	}
}

// A send that an instance does not answer with 200 is retried at the
// other instance, and the event counts as answered once one does.
func TestSendTriesTheOtherInstance(t *testing.T) {
	t.Parallel()
	var down, up atomic.Int64
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		down.Add(1)
		http.Error(w, "no database", http.StatusServiceUnavailable)
	}))
	t.Cleanup(unavailable.Close)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(ok.Close)
	s := newInboxSender([]string{unavailable.URL, ok.URL})
	ev := inboxEvent{id: "ev-1", entity: "customer-1", version: 1, body: []byte(`{"id":"ev-1"}`)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.send(ctx, unavailable.URL, ev)
	require.NoError(t, ctx.Err(), "answered before the deadline")
	require.Equal(t, int64(1), down.Load(), "the first instance, once")
	require.Equal(t, int64(1), up.Load(), "then the other, which answered")
	require.True(t, s.acked["ev-1"])
}
