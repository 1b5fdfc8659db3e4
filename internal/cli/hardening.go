package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/retention"
)

// hardening is the configuration of the client address behind proxies,
// the audit trail's anchors outside the database and retention.
type hardening struct {
	trustedProxies []*net.IPNet
	// auditKeyFile holds the audit sealing key; "": unkeyed. Read by
	// auditKey, once per command.
	auditKeyFile string
	// auditCheckpoints: where checkpoints go, and how often.
	auditCheckpointFile     string
	auditCheckpointRows     int64
	auditCheckpointInterval time.Duration
	// idempotencyTTL: how long an idempotency key and its response are kept.
	idempotencyTTL time.Duration
	retention      retention.Config
}

// parseHardening reads hardeningSettings into cfg.hardening.
func parseHardening(cfg *config, values map[string]*string) error {
	h := &cfg.hardening
	var err error
	if h.trustedProxies, err = httpserver.ParseTrustedProxies(*values["trusted-proxies"]); err != nil {
		return fmt.Errorf("invalid --trusted-proxies: %w", err)
	}
	h.auditKeyFile = *values["audit-key-file"]
	h.auditCheckpointFile = *values["audit-checkpoint-file"]
	if h.auditCheckpointFile == "" {
		h.auditCheckpointFile = filepath.Join(cfg.dataDir, "audit-checkpoints.jsonl")
	}
	if h.auditCheckpointRows, err = strconv.ParseInt(*values["audit-checkpoint-rows"], 10, 64); err != nil || h.auditCheckpointRows < 1 {
		return fmt.Errorf("invalid audit checkpoint rows %q: want a number, 1 or more", *values["audit-checkpoint-rows"])
	}
	for _, d := range []struct {
		flag string
		to   *time.Duration
	}{
		{"audit-checkpoint-interval", &h.auditCheckpointInterval},
		{"idempotency-ttl", &h.idempotencyTTL},
		{"retain-inbox-events", &h.retention.InboxEvents},
		{"retain-breaker-events", &h.retention.BreakerEvents},
		{"retain-replay-jobs", &h.retention.ReplayJobs},
		{"retention-interval", &h.retention.Interval},
		{"retention-statement-timeout", &h.retention.StatementTimeout},
	} {
		if *d.to, err = time.ParseDuration(*values[d.flag]); err != nil || *d.to < time.Second {
			return fmt.Errorf("invalid --%s %q: want a duration of 1s or more", d.flag, *values[d.flag])
		}
	}
	return nil
}

// auditKey reads the audit sealing key from its file (surrounding
// whitespace removed), or returns nil when none is configured.
func auditKey(cfg config) ([]byte, error) {
	if cfg.hardening.auditKeyFile == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(cfg.hardening.auditKeyFile)
	if err != nil {
		return nil, fmt.Errorf("read the audit key: %w", err)
	}
	key := bytes.TrimSpace(raw)
	if len(key) < audit.MinKeyBytes {
		return nil, fmt.Errorf("the audit key in %s has %d bytes: want %d or more (for example: head -c 32 /dev/urandom | base64 > %s)",
			cfg.hardening.auditKeyFile, len(key), audit.MinKeyBytes, cfg.hardening.auditKeyFile)
	}
	return key, nil
}

// auditSealerConfig is the audit Sealer's configuration.
func auditSealerConfig(cfg config, key []byte) audit.SealerConfig {
	return audit.SealerConfig{
		Key: key, CheckpointFile: cfg.hardening.auditCheckpointFile,
		CheckpointRows: cfg.hardening.auditCheckpointRows, CheckpointInterval: cfg.hardening.auditCheckpointInterval,
	}
}

// startAnchors starts the background services of this file for serve:
// the audit sealer (seals and checkpoints) and retention. stop stops both
// (the sealer writes its last checkpoint) and must run before the pool
// closes.
func startAnchors(ctx context.Context, cfg config, pool *pgxpool.Pool, logger *slog.Logger) (stop func(), err error) {
	key, err := auditKey(cfg)
	if err != nil {
		return nil, err
	}
	sc := auditSealerConfig(cfg, key)
	sc.Logger = logger.With(slog.String("component", "audit"))
	if key == nil {
		sc.Logger.Warn("no --audit-key-file: the audit trail is not sealed, so rows edited and re-chained in the database would pass audit verify; checkpoints are still written",
			slog.String("checkpoint_file", sc.CheckpointFile))
	}
	sealer, err := audit.NewSealer(pool, sc)
	if err != nil {
		return nil, err
	}
	if err := sealer.Start(ctx); err != nil {
		return nil, err
	}
	rc := cfg.hardening.retention
	rc.Logger = logger.With(slog.String("component", "retention"))
	pruner := retention.New(pool, rc)
	if err := pruner.Start(ctx); err != nil {
		sealer.Stop()
		return nil, err
	}
	return func() {
		pruner.Stop()
		sealer.Stop()
	}, nil
}
