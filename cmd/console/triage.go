package main

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/internal/ws"
)

// newTriage builds collaborative triage: the mutation engine and this
// instance's socket server with its presence, both waking the change feed
// through notify (the process's coalescing notifier) after each commit.
// guard closes the socket of a session revoked on any instance at once,
// as it ends the session's SSE streams; without it a revoked session would
// keep its socket until the next recheck. The caller subscribes the
// server to the change feed, starts it, and stops it before the feed.
func newTriage(pool *pgxpool.Pool, guard *auth.StreamGuard, notify func(), logger *slog.Logger) (*triage.Engine, *ws.Server) {
	logger = logger.With(slog.String("component", "triage"))
	engine := &triage.Engine{Pool: pool, Notify: notify, Logger: logger}
	presence := &triage.Presence{Pool: pool, Instance: outbox.DefaultOwner(), Notify: notify, Logger: logger}
	return engine, ws.New(ws.Config{Engine: engine, Presence: presence, Streams: guard, Logger: logger})
}
