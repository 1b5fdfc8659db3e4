package cli

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/destcheck"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/migrate"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/reconcile"
	"github.com/switchyard/switchyard/internal/sse"
	"github.com/switchyard/switchyard/internal/stats"
	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/internal/ws"
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
	inboxHandlers() inbox.Registry
	demoPanel() console.DemoPanel
}

// serveWith is serve with extras (nil: none).
func serveWith(ctx context.Context, cfg config, logger *slog.Logger, extras serveExtras) error {
	// Listen first: a busy port or a refused address should fail before a
	// database starts.
	ln, loopback, err := listen(cfg.listen, cfg.demo)
	if err != nil {
		return err
	}
	defer ln.Close()
	// With --database-wait, a database that cannot be reached yet is
	// waited for (by default the first failure is final: a person who
	// started the console with a wrong URL hears of it at once).
	var db *database
	var migrator *migrate.Migrator
	err = cfg.awaitDatabase(ctx, logger, func(ctx context.Context) (err error) {
		db, migrator, err = openMigrated(ctx, cfg, logger)
		return err
	})
	if err != nil {
		if db != nil { // opened, then stopped at once
			migrator.Close()
			db.Close()
		}
		if ctx.Err() != nil {
			return nil // stopped while starting or waiting
		}
		return err
	}
	defer db.Close()
	defer migrator.Close()
	var demoPanel console.DemoPanel
	if extras != nil {
		if err := extras.prepare(ctx, db.pool, &cfg); err != nil {
			return err
		}
		demoPanel = extras.demoPanel()
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Inbox failures, audit rows, revoked sessions and bulk replay progress
	// go to the change feed; the notifier wakes every console's listener
	// after each such commit, coalesced.
	wakes, stopWakes, err := startWakeups(ctx, db, logger)
	if err != nil {
		return err
	}
	defer stopWakes()
	notifier := wakes.notifier
	guard := auth.NewStreamGuard()
	triageEngine, triageSocket := newTriage(cfg.triage, db.pool, guard, notifier.Poke, logger)
	hub, feed, stopLive, err := startLive(ctx, db, wakes, guard, logger, triageSocket.Observe)
	if err != nil {
		return err
	}
	defer stopLive()
	if err := triageSocket.Start(ctx); err != nil {
		return err
	}
	defer triageSocket.Stop() // before the feed stops: it closes every socket
	accounts := auth.New(db.pool, auth.Config{
		IdleTimeout: cfg.sessionIdle, AbsoluteTimeout: cfg.sessionMax,
		Notify: notifier.Poke, Logger: logger.With(slog.String("component", "auth")),
	})
	if err := checkAccess(ctx, cfg, loopback, accounts, logger); err != nil {
		return err
	}
	stopAnchors, err := startAnchors(ctx, cfg, db.pool, logger)
	if err != nil {
		return err
	}
	defer stopAnchors()
	replays := bulkreplay.NewRunner(db.pool, bulkreplay.Config{
		LeaseDuration: cfg.lease, Changed: notifier.Poke, Logger: logger.With(slog.String("component", "bulkreplay")),
		Workers: map[string]bulkreplay.Worker{bulkreplay.KindRepair: action.RepairJobWorker()},
	})
	if err := replays.Start(ctx); err != nil {
		return err
	}
	defer replays.Stop()
	// Reconciliation checks (internal/reconcile): any number of instances,
	// one runner per check at a time (its lease).
	reconciler := reconcile.NewRunner(db.pool, reconcile.Config{Owner: outbox.DefaultOwner(), Logger: logger.With(slog.String("component", "reconcile"))})
	if err := reconciler.Start(ctx); err != nil {
		return err
	}
	defer reconciler.Stop()
	receiver, stopInbox, err := newInboxReceiver(ctx, db.pool, cfg, inboxHandlers(cfg, extras), registry, logger.With(slog.String("component", "inbox")), notifier.Poke)
	if err != nil {
		return err
	}
	defer stopInbox()
	// The dashboard's statistics: one leader per cluster computes them;
	// every viewer reads the stored snapshot (internal/stats).
	statsService := stats.New(db.pool, stats.Config{Owner: outbox.DefaultOwner(), Logger: logger.With(slog.String("component", "stats"))})
	if err := statsService.Start(ctx); err != nil {
		return err
	}
	defer statsService.Stop()
	// JetStream destinations' streams, rechecked in the background
	// (internal/destcheck): a stream created or deleted after a save shows
	// on the dashboard and the configuration pages within a minute.
	rechecks := destcheck.New(db.pool, destcheck.Config{NATSURL: cfg.natsURL, Changed: notifier.Poke, Logger: logger.With(slog.String("component", "destcheck"))})
	if err := rechecks.Start(ctx); err != nil {
		return err
	}
	defer rechecks.Stop()
	// The configuration page's saves reload this process's routes at once
	// (the dispatcher starts after the web handlers are built).
	var reloadRoutes atomic.Pointer[func()]
	destinationsSaved := func() {
		if f := reloadRoutes.Load(); f != nil {
			(*f)()
		}
	}
	e, err := newWeb(db, migrator, liveParts{events: hub, feed: feed}, logger, registry, receiver, cfg, access{accounts: accounts, guard: guard, notify: notifier.Poke, triage: triageEngine, triageSocket: triageSocket,
		inboxHandlers: slices.Sorted(maps.Keys(inboxHandlers(cfg, extras))), destinationsSaved: destinationsSaved}, demoPanel)
	if err != nil {
		return err
	}
	if cfg.workers > 0 {
		stopDispatcher, reload, err := startDispatcher(ctx, db, cfg, logger, registry, wakes)
		if err != nil {
			return err
		}
		reloadRoutes.Store(&reload)
		defer stopDispatcher()
	}
	if extras != nil {
		extras.start(ctx, db.pool, "http://"+ln.Addr().String())
	}
	stopMetrics, err := serveMetrics(ctx, cfg, loopback, registry, logger)
	if err != nil {
		return err
	}
	defer stopMetrics()
	logger.Info("console listening", slog.String("url", "http://"+ln.Addr().String()))
	if cfg.started != nil {
		cfg.started("http://" + ln.Addr().String())
	}
	err = httpserver.Run(ctx, e, ln, cfg.serveConfig(logger))
	logger.Info("console stopped")
	return err
}

// listen opens the console's address and reports whether it is loopback.
// Demo mode, which signs visitors in without a password, serves only on
// loopback; any other address needs accounts (checkAccess, once the
// database is open).
func listen(addr string, demo bool) (net.Listener, bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, false, fmt.Errorf("invalid listen address %q: %w", addr, err)
	}
	loopback := isLoopbackHost(host)
	if demo && !loopback {
		return nil, false, fmt.Errorf("refusing to listen on %s in demo mode: demo mode signs everyone in as an administrator, so it serves only on a loopback address such as 127.0.0.1:8080", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, false, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, loopback, nil
}

// checkAccess refuses a non-loopback address while no account exists
// (nobody could sign in, and the first visitor should not be the one to
// decide), and tells the operator how to create the first admin.
func checkAccess(ctx context.Context, cfg config, loopback bool, accounts *auth.Service, logger *slog.Logger) error {
	exist, err := accounts.AccountsExist(ctx)
	if err != nil {
		return err
	}
	if exist {
		return nil
	}
	const hint = "create the first admin with: console user add --role admin NAME (the password is read from stdin or asked for)"
	if !loopback && !cfg.demo {
		return fmt.Errorf("refusing to serve on %s: no account exists yet; %s", cfg.listen, hint)
	}
	if cfg.demo {
		logger.Info("demo mode: visitors from this machine are signed in as a demo admin; to use accounts, " + hint)
		return nil
	}
	logger.Warn("no account exists yet: nobody can sign in; " + hint)
	return nil
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

// startLive starts the process's one change feed listener (on the one
// LISTEN connection) and the one SSE hub that fans it out to every browser. The
// hub closes as soon as ctx ends, so open streams end before the HTTP
// server waits for requests in flight; stop stops the rest.
//
// guard follows the same listener, so that revoked sessions' streams close
// on this instance whichever instance revoked them; so do subscribers (the
// triage sockets).
func startLive(ctx context.Context, db *database, wakes wakeups, guard *auth.StreamGuard, logger *slog.Logger, subscribers ...changefeed.Subscriber) (*sse.Hub, *changefeed.Listener, func(), error) {
	listener := changefeed.NewListener(db.pool, changefeed.Config{
		Logger: logger.With(slog.String("component", "changefeed")), Notifications: wakes.listen,
	})
	if err := listener.Start(ctx); err != nil {
		return nil, nil, nil, err
	}
	_, unwatch := listener.Subscribe(guard.Observe)
	unsubscribes := make([]func(), len(subscribers))
	for i, s := range subscribers {
		_, unsubscribes[i] = listener.Subscribe(s)
	}
	hub := sse.New(listener, sse.Config{Logger: logger.With(slog.String("component", "sse"))})
	stopHub := context.AfterFunc(ctx, hub.Close)
	return hub, listener, func() {
		stopHub()
		hub.Close()
		unwatch()
		for _, unsubscribe := range unsubscribes {
			unsubscribe()
		}
		listener.Stop()
	}, nil
}

// liveParts are what the console's pages need of the live feed: the
// stream handler and the listener's status (for the dashboard).
type liveParts struct {
	events http.Handler
	feed   console.FeedStatus
}

// access is what the console needs to sign people in.
type access struct {
	accounts *auth.Service
	guard    *auth.StreamGuard
	notify   func() // wakes the change feed after an operator action
	// triage and triageSocket serve collaborative triage.
	triage       *triage.Engine
	triageSocket *ws.Server
	// inboxHandlers names the Go inbox handlers, for the source form;
	// destinationsSaved reloads this process's routes after a save.
	inboxHandlers     []string
	destinationsSaved func()
}

// newWeb wires the console's handlers into a configured echo instance.
func newWeb(db *database, migrator *migrate.Migrator, live liveParts, logger *slog.Logger, registry *prometheus.Registry, receiver *inbox.Receiver, cfg config, acc access, demo console.DemoPanel) (*echo.Echo, error) {
	assets, err := static.New()
	if err != nil {
		return nil, fmt.Errorf("load static assets: %w", err)
	}
	handler := console.New(console.Deps{
		Logger:    logger,
		Assets:    assets,
		Readiness: console.DatabaseReadiness{Pool: db.pool, Migrations: migrator},
		Gatherer:  registry,
		Events:    live.events,
		Inbox:     receiver, InboxMaxBody: cfg.inboxMaxBody, Getenv: cfg.getenv,
		InboxHandlers: acc.inboxHandlers, NATSURL: cfg.natsURL, DestinationsSaved: acc.destinationsSaved,
		Auth: acc.accounts, Streams: acc.guard, AuditLog: audit.Log{DB: db.pool},
		Demo: cfg.demo, SecureCookies: cfg.secureCookies, ViewerPayloads: cfg.viewerPayloads,
		MetricsToken: cfg.web.metricsToken, MetricsHidden: cfg.metricsHidden(),
		DB:             db.pool,
		Stats:          stats.NewReader(db.pool, 0),
		Feed:           live.feed,
		DemoPanel:      demo,
		Notify:         acc.notify,
		IdempotencyTTL: cfg.hardening.idempotencyTTL,
		Triage:         acc.triage, TriageSocket: acc.triageSocket,
	})
	hosts := cfg.allowedHosts
	if cfg.demo {
		// Demo mode signs in without a cookie: a DNS-rebinding page
		// would be signed in too, so only loopback names are answered.
		hosts = httpserver.LoopbackHosts
	}
	e, err := httpserver.New(httpserver.Config{
		Logger: logger, Registerer: registry, RenderError: handler.RenderError,
		AllowedHosts: hosts, BodyLimit: handler.BodyLimit, Streaming: console.Streaming,
		ForPrograms:    console.ForPrograms,
		CSRF:           &httpserver.CSRFConfig{Secure: cfg.secureCookies, Exempt: console.CSRFExempt, Session: handler.SessionToken},
		TrustedProxies: cfg.hardening.trustedProxies,
	})
	if err != nil {
		return nil, err
	}
	handler.Register(e)
	return e, nil
}
