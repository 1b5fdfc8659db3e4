package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/migrate"
	"github.com/switchyard/switchyard/web/static"
)

// serve runs the web console until ctx is cancelled (SIGINT or SIGTERM),
// then drains HTTP, closes the pool and stops the embedded server.
func serve(ctx context.Context, cfg config, logger *slog.Logger) error {
	// Listen first: a busy port should fail before a database starts.
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.listen, err)
	}
	defer ln.Close()
	db, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	migrator, err := migrate.New(db.pool, logger.With(slog.String("component", "migrate")))
	if err != nil {
		return err
	}
	defer migrator.Close()
	applied, err := migrator.Up(ctx)
	if err != nil {
		return err
	}
	logger.Info("database ready", slog.Int("migrations_applied", applied), slog.Bool("embedded", db.cluster != nil))

	assets, err := static.New()
	if err != nil {
		return fmt.Errorf("load static assets: %w", err)
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	handler := console.New(console.Deps{
		Logger:    logger,
		Assets:    assets,
		Readiness: console.DatabaseReadiness{Pool: db.pool, Migrations: migrator},
		Gatherer:  registry,
	})
	e, err := httpserver.New(httpserver.Config{Logger: logger, Registerer: registry, RenderError: handler.RenderError})
	if err != nil {
		return err
	}
	handler.Register(e)
	logger.Info("console listening", slog.String("url", "http://"+ln.Addr().String()))
	err = httpserver.Run(ctx, e, ln, cfg.shutdownTimeout)
	logger.Info("console stopped")
	return err
}
