package cli

import (
	"errors"
	"flag"
	"strings"

	"github.com/switchyard/switchyard/internal/bench"
	"github.com/switchyard/switchyard/internal/chaos"
)

// parseBenchArgs is parseInterleaved for `console bench`: it parses the
// console's own flags (--database-url, --data, --log-level, ...) wherever
// they stand, and leaves every other word, and every flag the bench
// defines, to the bench in their order. A bench flag wins over a console
// flag of the same name: `console bench dispatch --workers 8` sets the
// bench's workers. Everything after "--" is the bench's.
func parseBenchArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	return parsePassing(fs, args, bench.DefinesFlag)
}

// parseChaosArgs is parseBenchArgs for `console chaos`: its --data is the
// chaos run's own cluster, never the console's.
func parseChaosArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	return parsePassing(fs, args, chaos.DefinesFlag)
}

// parsePassing parses the console's flags in args and returns the rest,
// flags that own defines included, in their order.
func parsePassing(fs *flag.FlagSet, args []string, own func(string) bool) ([]string, error) {
	var console, rest []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--" { // the rest is the bench's, as flag.Parse would have it
			rest = append(rest, args[i:]...)
			break
		}
		name, hasValue, isFlag := splitFlagArg(args[i])
		f := fs.Lookup(name)
		if !isFlag || f == nil || own(name) {
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

// splitFlagArg reads "-name", "--name" or "--name=value" as the flag
// package does; "--" and words not starting with "-" are not flags.
func splitFlagArg(arg string) (name string, hasValue, isFlag bool) {
	if len(arg) < 2 || arg[0] != '-' {
		return "", false, false
	}
	name = strings.TrimPrefix(arg[1:], "-")
	if name == "" || name[0] == '-' || name[0] == '=' {
		return "", false, false
	}
	name, _, hasValue = strings.Cut(name, "=")
	return name, hasValue, true
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
