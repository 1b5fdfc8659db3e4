package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/changefeed"
)

// auditCommand runs `console audit verify`: it recomputes the audit
// trail's hash chain and fails naming the first row that does not match.
func auditCommand(ctx context.Context, cfg config, logger *slog.Logger, out io.Writer) error {
	if len(cfg.args) != 1 || cfg.args[0] != "verify" {
		return fmt.Errorf("usage: console audit verify")
	}
	db, migrator, err := openMigrated(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	defer migrator.Close()
	n, err := audit.Verify(ctx, db.pool)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "audit trail intact: %d rows verified\n", n)
	return nil
}

// notifyFeed wakes every console's change feed listener.
func notifyFeed(ctx context.Context, db *database) error {
	return changefeed.Notify(ctx, db.pool)
}
