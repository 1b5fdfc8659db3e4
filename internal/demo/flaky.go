package demo

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/switchyard/switchyard/internal/destination/webhook"
)

// Settings are the knobs of a running demo that its panel changes.
type Settings struct {
	OrdersPerSecond float64 // orders (and their outbox events) written per second
	InboxPerSecond  float64 // signed webhooks sent to the inbox per second
	FailurePercent  int     // share of deliveries the flaky destination fails
	LatencyMs       int     // how long the flaky destination takes to answer
	Outage          bool    // the flaky destination answers 503 to everything
	ProviderDown    bool    // the external system's lookups answer 503
}

// control holds the demo's settings, read by the flaky destination and
// the traffic generator on every request and tick; the panel changes them.
// It is safe for concurrent use.
type control struct {
	mu sync.Mutex
	s  Settings // guarded by mu
}

func (d *control) settings() Settings {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.s
}

func (d *control) set(s Settings) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.s = s
}

// demoErrors are the flaky destination's failures: a few distinct errors,
// so that dead letters fall into a few groups.
var demoErrors = []struct {
	code int
	body string
}{
	{http.StatusInternalServerError, "upstream database timeout after 5000 ms"},
	{http.StatusBadGateway, "bad gateway: payment service unreachable"},
	{http.StatusTooManyRequests, "rate limited: retry later"},
}

// serveFlaky runs the demo's local webhook destination on a loopback port
// until ctx ends: it answers after the configured latency, fails the
// configured share of requests, and answers 503 to all during an outage.
// It returns the URL to deliver to.
// accepted, if not nil, is told the webhook-id and the body of every
// delivery it accepted (the external system's record of them).
func serveFlaky(ctx context.Context, control *control, accepted func(key string, body []byte)) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := control.settings()
		if s.LatencyMs > 0 {
			t := time.NewTimer(time.Duration(s.LatencyMs) * time.Millisecond)
			select {
			case <-r.Context().Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if s.Outage {
			http.Error(w, "service unavailable: planned outage", http.StatusServiceUnavailable)
			return
		}
		if rand.IntN(100) < s.FailurePercent {
			e := demoErrors[rand.IntN(len(demoErrors))]
			http.Error(w, e.body, e.code)
			return
		}
		if accepted != nil {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20)) // a short body is no repair: nothing lost
			accepted(r.Header.Get(webhook.HeaderID), body)
		}
		w.WriteHeader(http.StatusNoContent)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	return "http://" + ln.Addr().String() + "/hooks", nil
}
