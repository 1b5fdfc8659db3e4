package console_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/web/static"
)

// BenchmarkInboxMiddleware is POST /inbox/:source to an unknown source
// through every shared middleware, without a database: what the chain and
// the handler's body read cost per request. Its allocs/op do not move with
// the machine's load (BENCHMARKS.md, the inbox A/B of issues 10 and 15).
func BenchmarkInboxMiddleware(b *testing.B) {
	quiet := slog.New(slog.DiscardHandler)
	registry := prometheus.NewRegistry()
	receiver := inbox.NewReceiver(inbox.ReceiverConfig{Metrics: inbox.NewMetrics(registry)})
	assets, err := static.New()
	if err != nil {
		b.Fatal(err)
	}
	h := console.New(console.Deps{Logger: quiet, Assets: assets, Gatherer: registry, Inbox: receiver})
	e, err := httpserver.New(httpserver.Config{Logger: quiet, Registerer: registry, RenderError: h.RenderError, AllowedHosts: httpserver.LoopbackHosts})
	if err != nil {
		b.Fatal(err)
	}
	h.Register(e)
	body := []byte(`{"customer": {"id": "bench-12345", "name": "Customer 12345", "email": "c12345@example.com"}}`)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/inbox/nosuch", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", "bench-12345")
		req.Header.Set("webhook-timestamp", "1700000000")
		req.Header.Set("webhook-signature", "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound {
			b.Fatalf("status %d", rec.Code)
		}
	}
}
