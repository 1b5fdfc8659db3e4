package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"github.com/switchyard/switchyard/internal/migrate"
)

// migrateCommand runs `console migrate [up|down|status]` (default up).
func migrateCommand(ctx context.Context, cfg config, logger *slog.Logger, out io.Writer) error {
	action := "up"
	if len(cfg.args) > 0 {
		action = cfg.args[0]
	}
	if action != "up" && action != "down" && action != "status" {
		return fmt.Errorf("unknown migrate action %q: want up, down or status", action)
	}
	db, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	m, err := migrate.New(db.pool, logger.With(slog.String("component", "migrate")))
	if err != nil {
		return err
	}
	defer m.Close()
	switch action {
	case "up":
		n, err := m.Up(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "applied %d migration(s)\n", n)
	case "down":
		if err := m.Down(ctx); err != nil {
			return err
		}
		fmt.Fprintln(out, "rolled back one migration")
	case "status":
		status, err := m.Status(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tSTATE\tAPPLIED AT\tFILE")
		for _, s := range status {
			applied := "-"
			if !s.AppliedAt.IsZero() {
				applied = s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Source.Version, s.State, applied, s.Source.Path)
		}
		return tw.Flush()
	}
	return nil
}
