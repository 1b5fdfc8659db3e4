// Command console is Switchyard's one binary: the web console (serve), the
// dispatcher (dispatch), the demo (internal/demo), the benchmarks
// (internal/bench) and the administrative commands (migrate, user, audit).
// This package is the composition root: it reads configuration, wires the
// packages together and handles signals; it holds no logic of its own.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchyard/switchyard/internal/bench"
	"github.com/switchyard/switchyard/internal/chaos"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command and returns the process exit code. Errors are
// printed as one line on stderr.
func run(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, errHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "console:", err)
		return 2
	}
	logger := newLogger(cfg, stderr)
	// SIGHUP too: a closed terminal or a dropped ssh session would
	// otherwise kill the console at once and orphan its embedded server.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	go func() {
		// After the first signal, restore the default handling: a second
		// Ctrl-C ends a shutdown that hangs.
		<-ctx.Done()
		stop()
	}()
	switch cfg.command {
	case "serve":
		err = serve(ctx, cfg, logger)
	case "demo":
		err = demoCommand(ctx, cfg, logger)
	case "dispatch":
		err = dispatch(ctx, cfg, logger)
	case "bench":
		err = bench.Run(ctx, bench.Config{Database: databaseConfig(cfg)}, cfg.args, logger, stdout)
	case "chaos":
		err = chaos.Main(ctx, cfg.args, cfg.databaseURL, []string{"PATH=" + getenv("PATH")}, stdout, stderr, logger)
	case "migrate":
		err = migrateCommand(ctx, cfg, logger, stdout)
	case "user":
		err = userCommand(ctx, cfg, logger, stdin, stdout)
	case "audit":
		err = auditCommand(ctx, cfg, logger, stdout)
	case "help":
		_, _ = parseConfig([]string{"-h"}, getenv, stdout)
		return 0
	default:
		err = fmt.Errorf("unknown command %q (try: console help)", cfg.command)
	}
	if err != nil {
		fmt.Fprintln(stderr, "console:", err)
		return 1
	}
	return 0
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.logLevel}
	if cfg.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
