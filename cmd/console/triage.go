package main

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/internal/ws"
)

// newTriage builds collaborative triage: the mutation engine (which wakes
// the change feed with its own NOTIFY after each commit) and this
// instance's socket server with its presence. The caller subscribes the
// server to the change feed, starts it, and stops it before the feed.
func newTriage(pool *pgxpool.Pool, logger *slog.Logger) (*triage.Engine, *ws.Server) {
	logger = logger.With(slog.String("component", "triage"))
	engine := &triage.Engine{Pool: pool, Logger: logger}
	presence := &triage.Presence{Pool: pool, Instance: outbox.DefaultOwner(), Logger: logger}
	return engine, ws.New(ws.Config{Engine: engine, Presence: presence, Logger: logger})
}
