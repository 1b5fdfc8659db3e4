package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/changefeed"
)

// auditCommand runs `console audit verify`: it recomputes the audit
// trail's hash chain, checks every seal under --audit-key-file (when
// given) and compares the trail with the last checkpoint in
// --audit-checkpoint-file. It fails naming every problem: a row that does
// not match its hash or seal, rows deleted from the end or the middle.
func auditCommand(ctx context.Context, cfg config, logger *slog.Logger, out io.Writer) error {
	if len(cfg.args) != 1 || cfg.args[0] != "verify" {
		return fmt.Errorf("usage: console audit verify")
	}
	key, err := auditKey(cfg)
	if err != nil {
		return err
	}
	db, migrator, err := openMigrated(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	defer migrator.Close()
	report, err := audit.Check(ctx, db.pool, audit.CheckConfig{Key: key, CheckpointFile: cfg.hardening.auditCheckpointFile})
	printAuditReport(out, report)
	if err != nil {
		return fmt.Errorf("audit trail NOT intact:\n%w", err)
	}
	fmt.Fprintln(out, "audit trail intact")
	return nil
}

// printAuditReport says what was verified, and what could not be.
func printAuditReport(out io.Writer, r audit.Report) {
	fmt.Fprintf(out, "hash chain: %d rows verified\n", r.Rows)
	if r.Keyed {
		fmt.Fprintf(out, "seals: %d rows match their seal; %d newest not sealed yet\n", r.Sealed, r.Unsealed)
	}
	if cp := r.Checkpoint; cp != nil {
		fmt.Fprintf(out, "checkpoint: %s, row %d, %d rows (keyed: %t)\n", cp.At.Format(time.RFC3339), cp.ID, cp.Rows, cp.Keyed)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(out, "note: "+n)
	}
}

// notifyFeed wakes every console's change feed listener.
func notifyFeed(ctx context.Context, db *database) error {
	return changefeed.Notify(ctx, db.pool)
}
