package cli

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/internal/ws"
)

// triageConfig is collaborative triage's settings.
type triageConfig struct {
	// lease is a claim's lease (triage.Engine.Lease).
	lease time.Duration
	// presenceTTL is how long presence lasts without a refresh; the
	// sockets refresh it every third of it and this instance sweeps
	// expired rows every sixth, which the defaults (30s, 10s, 5s) are.
	presenceTTL time.Duration
	// ackDelay holds each answer after its commit: for tests only.
	ackDelay time.Duration
}

func parseTriage(values map[string]*string) (triageConfig, error) {
	var c triageConfig
	var err error
	if c.lease, err = time.ParseDuration(*values["triage-lease"]); err != nil || c.lease < time.Second {
		return c, fmt.Errorf("invalid triage lease %q: want a duration of 1s or more", *values["triage-lease"])
	}
	if c.presenceTTL, err = time.ParseDuration(*values["triage-presence-ttl"]); err != nil || c.presenceTTL < 600*time.Millisecond {
		return c, fmt.Errorf("invalid triage presence TTL %q: want a duration of 600ms or more", *values["triage-presence-ttl"])
	}
	if c.ackDelay, err = time.ParseDuration(*values["triage-ack-delay"]); err != nil || c.ackDelay < 0 {
		return c, fmt.Errorf("invalid triage ack delay %q: want a duration of 0s or more", *values["triage-ack-delay"])
	}
	return c, nil
}

// newTriage builds collaborative triage: the mutation engine and this
// instance's socket server with its presence, both waking the change feed
// through notify (the process's coalescing notifier) after each commit.
// guard closes the socket of a session revoked on any instance at once,
// as it ends the session's SSE streams; without it a revoked session would
// keep its socket until the next recheck. The caller subscribes the
// server to the change feed, starts it, and stops it before the feed.
func newTriage(cfg triageConfig, pool *pgxpool.Pool, guard *auth.StreamGuard, notify func(), logger *slog.Logger) (*triage.Engine, *ws.Server) {
	logger = logger.With(slog.String("component", "triage"))
	engine := &triage.Engine{Pool: pool, Lease: cfg.lease, Notify: notify, Logger: logger}
	presence := &triage.Presence{Pool: pool, Instance: outbox.DefaultOwner(), TTL: cfg.presenceTTL, Notify: notify, Logger: logger}
	if cfg.ackDelay > 0 {
		logger.Warn("triage answers are held after each commit: a setting for tests only", slog.Duration("triage_ack_delay", cfg.ackDelay))
	}
	return engine, ws.New(ws.Config{
		Engine: engine, Presence: presence, Streams: guard, Logger: logger,
		PresenceRefresh: cfg.presenceTTL / 3, SweepInterval: cfg.presenceTTL / 6, AckDelay: cfg.ackDelay,
	})
}
