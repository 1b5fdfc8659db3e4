// Package demo is `console demo`: a local flaky webhook destination, a
// traffic generator that writes orders with their outbox events in one
// transaction, signed webhooks into the console's own inbox (with
// duplicates and out-of-order events) handled by the customer-upsert
// handler (subpackage customer), an external system that mirrors the
// orders and the accepted deliveries for two reconciliation checks
// (mirror.go), and the panel at /demo that changes them while it runs,
// down to injecting drift into that external system or taking it down. Its tables and functions live in a schema of their own,
// switchyard_demo (subpackage demodb), which it creates at start: the core
// migrations never do, so a production database carries no demo tables.
//
// The command wires it into serve: Prepare after the migrations, then
// Getenv and Handlers for the dispatcher and the inbox receiver, Panel for
// the console, Start once the console listens.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/demo/customer"
	"github.com/switchyard/switchyard/internal/demo/demodb"
	"github.com/switchyard/switchyard/internal/destination/webhook"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/queries"
)

// The demo's destination and inbox source, and the environment names
// their secrets are read from (made up at start, never written anywhere).
const (
	Destination   = "demo-webhook"
	Source        = "demo-shop"
	webhookSecret = "SWITCHYARD_DEMO_WEBHOOK_SECRET"
	inboxSecret   = "SWITCHYARD_DEMO_INBOX_SECRET"
)

// defaults: a console that is visibly alive within seconds.
var defaults = Settings{OrdersPerSecond: 20, InboxPerSecond: 2, FailurePercent: 20, LatencyMs: 40}

// DefaultCheckInterval is how often the demo's reconciliation checks run
// unless Config says otherwise: drift injected on the panel shows within
// seconds.
const DefaultCheckInterval = 10 * time.Second

// Config configures a demo. Zero values take the documented defaults.
type Config struct {
	// CheckInterval is how often each of the demo's two reconciliation
	// checks runs; default DefaultCheckInterval. The browser tests
	// shorten it, so that they wait for a cycle a second, not ten.
	CheckInterval time.Duration
}

// Demo is one running demo. Its methods are called in the order the
// package documentation gives; Panel's result is safe for concurrent use.
type Demo struct {
	cfg     Config
	control *control
	mirror  *mirror
	logger  *slog.Logger
	secrets map[string]string
}

// New returns a demo with the default settings, not started.
func New(logger *slog.Logger, cfg Config) *Demo {
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	return &Demo{
		cfg:     cfg,
		control: &control{s: defaults},
		mirror:  &mirror{},
		logger:  logger,
		secrets: map[string]string{webhookSecret: newSecret(), inboxSecret: newSecret()},
	}
}

// Prepare installs the demo's schema (idempotently), starts the flaky
// destination until ctx ends, and writes the demo's destination and inbox
// source, before the dispatcher and the receiver read theirs.
func (d *Demo) Prepare(ctx context.Context, pool *pgxpool.Pool) error {
	if err := demodb.Install(ctx, pool); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	d.mirror.start(ctx)
	url, err := serveFlaky(ctx, d.control, d.mirror.accepted)
	if err != nil {
		return fmt.Errorf("demo: start the flaky destination: %w", err)
	}
	q := queries.New(pool)
	err = q.DestinationUpsert(ctx, queries.DestinationUpsertParams{
		Name: Destination, Kind: "webhook", Address: url, SecretRef: webhookSecret,
		RetryBaseMs: 500, RetryCapMs: 8000, MaxAttempts: 4, TimeoutMs: 5000, Burst: 1, Concurrency: 16,
		BreakerFailureRatio: 0.9, BreakerMinRequests: 20, BreakerOpenMs: 10000,
	})
	if err != nil {
		return fmt.Errorf("demo: write destination: %w", err)
	}
	if err := d.mirror.writeChecks(ctx, pool, d.cfg.CheckInterval); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	err = q.InboxSourceUpsert(ctx, queries.InboxSourceUpsertParams{
		Name: Source, Scheme: "standard-webhooks", SecretRefs: []string{inboxSecret},
		ToleranceSeconds: 300, OutOfOrder: "apply", Handler: customer.Name, MaxAttempts: 5,
	})
	if err != nil {
		return fmt.Errorf("demo: write inbox source: %w", err)
	}
	d.logger.Info("demo destination listening", slog.String("url", url))
	return nil
}

// Getenv returns getenv with the demo's secrets in front: the destination
// and source rows name them, and they exist only in this process.
func (d *Demo) Getenv(getenv func(string) string) func(string) string {
	return func(name string) string {
		if s, ok := d.secrets[name]; ok {
			return s
		}
		return getenv(name)
	}
}

// Handlers are the demo's inbox handlers: customer-upsert, which announces
// each customer to the demo's destination.
func (d *Demo) Handlers() inbox.Registry {
	return inbox.Registry{customer.Name: customer.Registration(customer.Config{Destination: Destination})}
}

// Start runs the traffic generators until ctx ends; baseURL is the
// console's.
func (d *Demo) Start(ctx context.Context, pool *pgxpool.Pool, baseURL string) {
	go runOrders(ctx, pool, d.control, d.mirror, d.logger)
	go d.mirror.follow(ctx, pool, d.logger)
	go runWebhooks(ctx, baseURL+"/inbox/"+Source, d.secrets[inboxSecret], d.control, d.logger)
	d.logger.Info("demo running: open the console; change the traffic at /demo", slog.String("url", baseURL))
}

// newSecret makes a Standard Webhooks secret.
func newSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (Go 1.24+)
	return webhook.SecretPrefix + base64.StdEncoding.EncodeToString(b)
}
