package cli

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/demo"
	"github.com/switchyard/switchyard/internal/inbox"
)

// demoCommand runs `console demo`: everything serve runs, on loopback (with
// the embedded PostgreSQL unless DATABASE_URL is set), plus the demo of
// internal/demo, which creates its own schema at start. Demo mode: anyone
// on loopback is signed in as the demo admin, with a banner saying so, and
// the console refuses any other address.
func demoCommand(ctx context.Context, cfg config, logger *slog.Logger) error {
	cfg.demo = true
	return serveWith(ctx, cfg, logger, demoExtras{demo.New(logger.With(slog.String("component", "demo")),
		demo.Config{CheckInterval: cfg.demoCheckInterval})})
}

// demoExtras wires internal/demo into serve (see serveExtras).
type demoExtras struct{ d *demo.Demo }

func (x demoExtras) prepare(ctx context.Context, pool *pgxpool.Pool, cfg *config) error {
	if err := x.d.Prepare(ctx, pool); err != nil {
		return err
	}
	cfg.getenv = x.d.Getenv(cfg.getenv)
	return nil
}

func (x demoExtras) start(ctx context.Context, pool *pgxpool.Pool, baseURL string) {
	x.d.Start(ctx, pool, baseURL)
}

func (x demoExtras) inboxHandlers() inbox.Registry { return x.d.Handlers() }
func (x demoExtras) demoPanel() console.DemoPanel  { return x.d.Panel() }
