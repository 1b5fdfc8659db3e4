// Package cli is the console's command line and composition root: it reads
// the configuration from flags and environment once, wires the packages
// together for each command (serve, dispatch, demo, migrate, user, audit,
// bench, chaos) and holds no logic of its own. cmd/console runs it as the
// console binary; the public package switchyard runs it inside another
// program's binary, with that program's inbox handlers (Options).
package cli

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
	"github.com/switchyard/switchyard/internal/inbox"
)

// Options are what a program that runs the console adds to its command line.
type Options struct {
	// Handlers are the program's Go inbox handlers, by the name inbox
	// sources give them (switchyard.inbox_sources.handler).
	Handlers inbox.Registry
	// Started, when set, is called with the console's base URL once it
	// serves (console serve and demo).
	Started func(baseURL string)
}

// UsageError is Execute's error for a command line that cannot be run as
// given (an unknown flag, an invalid setting): the console exits 2 on it.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Main runs one command with the process's arguments, environment and
// standard streams until it ends or a signal arrives, and returns the
// process exit code. Errors are printed as one line on stderr.
func Main(opts Options) int {
	return run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr, opts)
}

// run is Main with its inputs given.
func run(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, opts ...Options) int {
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
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	err := Execute(ctx, args, getenv, stdin, stdout, stderr, o)
	var usage *UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		fmt.Fprintln(stderr, "console:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "console:", err)
		return 1
	}
}

// Execute runs one command (args: the command, then its flags) until it
// ends or ctx is cancelled. getenv reads the settings and the secrets they
// name; help and usage go to stderr (console help: stdout). A command line
// that cannot be run returns a *UsageError.
func Execute(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, opts Options) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, errHelp) {
		return nil
	}
	if err != nil {
		return &UsageError{Err: err}
	}
	cfg.handlers, cfg.started = opts.Handlers, opts.Started
	logger := newLogger(cfg, stderr)
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
		return nil
	default:
		err = fmt.Errorf("unknown command %q (try: console help)", cfg.command)
	}
	return err
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.logLevel}
	if cfg.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
