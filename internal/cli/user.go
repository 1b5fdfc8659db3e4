package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/switchyard/switchyard/internal/auth"
)

// userCommand runs `console user add|passwd|disable NAME`. Passwords are
// read from stdin (the first line) or, on a terminal, asked for twice
// without echo: never from a flag, which would leave them in the shell's
// history and the process list.
func userCommand(ctx context.Context, cfg config, logger *slog.Logger, in io.Reader, out io.Writer) error {
	fs := newUserFlags()
	args, err := parseInterleaved(fs, cfg.args)
	if err != nil {
		return err
	}
	if len(args) != 2 {
		return errors.New("usage: console user add --role viewer|operator|admin NAME | console user passwd NAME | console user disable NAME")
	}
	action, name := args[0], args[1]
	if action != "add" && action != "passwd" && action != "disable" {
		return fmt.Errorf("unknown user action %q: want add, passwd or disable", action)
	}
	var role auth.Role
	if action == "add" {
		r, err := auth.ParseRole(fs.Lookup("role").Value.String())
		if err != nil {
			return err
		}
		role = r
	}
	var password string
	if action != "disable" {
		p, err := readPassword(in, out, name)
		if err != nil {
			return err
		}
		password = p
	}
	db, migrator, err := openMigrated(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	defer migrator.Close()
	svc := auth.New(db.pool, auth.Config{Logger: logger})
	switch action {
	case "add":
		err = svc.AddUser(ctx, auth.CLI, name, role, password)
	case "passwd":
		err = svc.SetPassword(ctx, auth.CLI, name, password)
	case "disable":
		err = svc.Disable(ctx, auth.CLI, name)
	}
	if err != nil {
		return err
	}
	// Open streams of ended sessions close on every instance once the
	// feed is read; a wake-up makes that immediate.
	if err := notifyFeed(ctx, db); err != nil {
		logger.Warn("change feed notify failed; consoles notice within their poll interval", slog.Any("error", err))
	}
	fmt.Fprintf(out, "%s: done for %s\n", action, auth.NormalizeName(name))
	return nil
}

func newUserFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("console user", flag.ContinueOnError)
	fs.String("role", "viewer", "the new account's role: viewer, operator or admin")
	return fs
}

// parseUserArgs is parseBenchArgs for `console user`: the console's own
// flags are parsed wherever they stand; --role and the words go to the
// user command.
func parseUserArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	user := newUserFlags()
	var console, rest []string
	for i := 0; i < len(args); i++ {
		name, hasValue, isFlag := splitFlagArg(args[i])
		f := fs.Lookup(name)
		if !isFlag || f == nil || user.Lookup(name) != nil {
			rest = append(rest, args[i])
			continue
		}
		console = append(console, args[i])
		if !hasValue && !isBoolFlag(f) && i+1 < len(args) {
			i++
			console = append(console, args[i])
		}
	}
	if err := fs.Parse(console); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, err
	}
	return rest, nil
}
