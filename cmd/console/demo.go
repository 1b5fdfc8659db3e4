package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/democustomer"
	"github.com/switchyard/switchyard/internal/destination/webhook"
	"github.com/switchyard/switchyard/internal/queries"
)

// The demo's destination and inbox source, and the environment names
// their secrets are read from (made up at start, never written anywhere).
const (
	demoDestination   = "demo-webhook"
	demoSource        = "demo-shop"
	demoWebhookSecret = "SWITCHYARD_DEMO_WEBHOOK_SECRET"
	demoInboxSecret   = "SWITCHYARD_DEMO_INBOX_SECRET"
)

// demoDefaults: a console that is visibly alive within seconds.
var demoDefaults = console.DemoSettings{OrdersPerSecond: 20, InboxPerSecond: 2, FailurePercent: 20, LatencyMs: 40}

// demo runs `console demo`: everything serve runs, on loopback (with the
// embedded PostgreSQL unless DATABASE_URL is set), plus a local flaky
// webhook destination, a traffic generator writing orders with their
// outbox events, and signed webhooks into the inbox with duplicates and
// out-of-order events. Its panel at /demo changes them while it runs.
func demo(ctx context.Context, cfg config, logger *slog.Logger) error {
	// Demo mode: anyone on loopback is signed in as the demo admin, with a
	// banner saying so, and the console refuses any other address.
	cfg.demo = true
	d := &demoRig{control: &demoControl{s: demoDefaults}, logger: logger.With(slog.String("component", "demo"))}
	return serveWith(ctx, cfg, logger, d)
}

// demoRig is serve's extension for the demo (see serveExtras).
type demoRig struct {
	control *demoControl
	logger  *slog.Logger
	secrets map[string]string
}

func (d *demoRig) demoControl() console.DemoControl { return d.control }

// prepare starts the flaky destination and writes the demo's destination
// and inbox source, before the dispatcher and the receiver read theirs.
func (d *demoRig) prepare(ctx context.Context, pool *pgxpool.Pool, cfg *config) error {
	d.secrets = map[string]string{demoWebhookSecret: newSecret(), demoInboxSecret: newSecret()}
	getenv := cfg.getenv
	cfg.getenv = func(name string) string {
		if s, ok := d.secrets[name]; ok {
			return s
		}
		return getenv(name)
	}
	cfg.demoCustomerDestination = demoDestination
	url, err := serveFlaky(ctx, d.control)
	if err != nil {
		return fmt.Errorf("demo: start the flaky destination: %w", err)
	}
	q := queries.New(pool)
	err = q.DestinationUpsert(ctx, queries.DestinationUpsertParams{
		Name: demoDestination, Kind: "webhook", Address: url, SecretRef: demoWebhookSecret,
		RetryBaseMs: 500, RetryCapMs: 8000, MaxAttempts: 4, TimeoutMs: 5000, Burst: 1, Concurrency: 16,
		BreakerFailureRatio: 0.9, BreakerMinRequests: 20, BreakerOpenMs: 10000,
	})
	if err != nil {
		return fmt.Errorf("demo: write destination: %w", err)
	}
	err = q.InboxSourceUpsert(ctx, queries.InboxSourceUpsertParams{
		Name: demoSource, Scheme: "standard-webhooks", SecretRefs: []string{demoInboxSecret},
		ToleranceSeconds: 300, OutOfOrder: "apply", Handler: democustomer.Name, MaxAttempts: 5,
	})
	if err != nil {
		return fmt.Errorf("demo: write inbox source: %w", err)
	}
	d.logger.Info("demo destination listening", slog.String("url", url))
	return nil
}

// start runs the traffic generators until ctx ends.
func (d *demoRig) start(ctx context.Context, pool *pgxpool.Pool, baseURL string) {
	go runOrders(ctx, pool, d.control, d.logger)
	go runWebhooks(ctx, baseURL+"/inbox/"+demoSource, d.secrets[demoInboxSecret], d.control, d.logger)
	d.logger.Info("demo running: open the console; change the traffic at /demo", slog.String("url", baseURL))
}

// newSecret makes a Standard Webhooks secret.
func newSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (Go 1.24+)
	return webhook.SecretPrefix + base64.StdEncoding.EncodeToString(b)
}
