package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/migrate"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/sse"
	"github.com/switchyard/switchyard/internal/stats"
	"github.com/switchyard/switchyard/web/static"
)

// serve runs the web console until ctx is cancelled (SIGINT or SIGTERM),
// then drains HTTP, closes the pool and stops the embedded server.
func serve(ctx context.Context, cfg config, logger *slog.Logger) error {
	return serveWith(ctx, cfg, logger, nil)
}

// serveExtras is what `console demo` adds to serve (demo.go).
type serveExtras interface {
	// prepare runs after the migrations, before the inbox receiver and the
	// dispatcher read their configuration; it may change cfg.
	prepare(ctx context.Context, pool *pgxpool.Pool, cfg *config) error
	// start runs once everything is wired; baseURL is the console's.
	start(ctx context.Context, pool *pgxpool.Pool, baseURL string)
	demoControl() console.DemoControl
}

// serveWith is serve with extras (nil: none).
func serveWith(ctx context.Context, cfg config, logger *slog.Logger, extras serveExtras) error {
	// Listen first: a busy port or a refused address should fail before a
	// database starts.
	ln, err := listen(cfg.listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	db, migrator, err := openMigrated(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	defer migrator.Close()
	var demoControl console.DemoControl
	if extras != nil {
		if err := extras.prepare(ctx, db.pool, &cfg); err != nil {
			return err
		}
		demoControl = extras.demoControl()
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	hub, stopLive, err := startLive(ctx, db, logger)
	if err != nil {
		return err
	}
	defer stopLive()
	// Inbox failures go to the change feed; the notifier wakes every
	// console's listener after each such commit, coalesced.
	notifier := changefeed.NewNotifier(db.pool, logger)
	if err := notifier.Start(ctx); err != nil {
		return err
	}
	defer notifier.Stop()
	receiver, err := newInboxReceiver(ctx, db.pool, cfg, registry, logger.With(slog.String("component", "inbox")), notifier.Poke)
	if err != nil {
		return err
	}
	// The dashboard's statistics: one leader per cluster computes them;
	// every viewer reads the stored snapshot (internal/stats).
	statsService := stats.New(db.pool, stats.Config{Owner: outbox.DefaultOwner(), Logger: logger.With(slog.String("component", "stats"))})
	if err := statsService.Start(ctx); err != nil {
		return err
	}
	defer statsService.Stop()
	e, err := newWeb(db, migrator, hub, logger, registry, receiver, cfg.inboxMaxBody, demoControl)
	if err != nil {
		return err
	}
	if cfg.workers > 0 {
		stopDispatcher, err := startDispatcher(ctx, db, cfg, logger, registry)
		if err != nil {
			return err
		}
		defer stopDispatcher()
	}
	if extras != nil {
		extras.start(ctx, db.pool, "http://"+ln.Addr().String())
	}
	logger.Info("console listening", slog.String("url", "http://"+ln.Addr().String()))
	err = httpserver.Run(ctx, e, ln, cfg.shutdownTimeout, logger)
	logger.Info("console stopped")
	return err
}

// listen opens the console's address. It refuses anything but loopback:
// the console has no sign-in yet, so on any other address anyone who can
// reach the port could use it.
func listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("invalid listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("refusing to listen on %s: the console has no sign-in yet, so it serves only on a loopback address such as 127.0.0.1:8080", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// openMigrated opens the database and applies every pending migration.
// The caller closes the migrator, then the database.
func openMigrated(ctx context.Context, cfg config, logger *slog.Logger) (*database, *migrate.Migrator, error) {
	db, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	migrator, err := migrate.New(db.pool, logger.With(slog.String("component", "migrate")))
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	applied, err := migrator.Up(ctx)
	if err != nil {
		migrator.Close()
		db.Close()
		return nil, nil, err
	}
	logger.Info("database ready", slog.Int("migrations_applied", applied), slog.Bool("embedded", db.cluster != nil))
	return db, migrator, nil
}

// startLive starts the process's one change feed listener (one LISTEN
// connection) and the one SSE hub that fans it out to every browser. The
// hub closes as soon as ctx ends, so open streams end before the HTTP
// server waits for requests in flight; stop stops the rest.
func startLive(ctx context.Context, db *database, logger *slog.Logger) (*sse.Hub, func(), error) {
	listener := changefeed.NewListener(db.pool, changefeed.Config{Logger: logger.With(slog.String("component", "changefeed"))})
	if err := listener.Start(ctx); err != nil {
		return nil, nil, err
	}
	hub := sse.New(listener, sse.Config{Logger: logger.With(slog.String("component", "sse"))})
	stopHub := context.AfterFunc(ctx, hub.Close)
	return hub, func() {
		stopHub()
		hub.Close()
		listener.Stop()
	}, nil
}

// newWeb wires the console's handlers into a configured echo instance.
func newWeb(db *database, migrator *migrate.Migrator, events http.Handler, logger *slog.Logger, registry *prometheus.Registry, receiver *inbox.Receiver, inboxMaxBody int64, demo console.DemoControl) (*echo.Echo, error) {
	assets, err := static.New()
	if err != nil {
		return nil, fmt.Errorf("load static assets: %w", err)
	}
	handler := console.New(console.Deps{
		Logger:    logger,
		Assets:    assets,
		Readiness: console.DatabaseReadiness{Pool: db.pool, Migrations: migrator},
		Gatherer:  registry,
		Events:    events,
		Inbox:     receiver, InboxMaxBody: inboxMaxBody,
		DB:    db.pool,
		Stats: stats.NewReader(db.pool, 0),
		Demo:  demo,
	})
	e, err := httpserver.New(httpserver.Config{
		Logger: logger, Registerer: registry, RenderError: handler.RenderError,
		AllowedHosts: httpserver.LoopbackHosts,
	})
	if err != nil {
		return nil, err
	}
	handler.Register(e)
	return e, nil
}
