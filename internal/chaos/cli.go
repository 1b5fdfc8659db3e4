package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrFailed is returned by Main when the run was made and the checker
// failed it.
var ErrFailed = errors.New("chaos: the history check failed")

// flags are `console chaos`'s own.
type flags struct {
	fs                 *flag.FlagSet
	seconds, rate      *int
	seed               *uint64
	faults, data, work *string
}

func newFlags() flags {
	fs := flag.NewFlagSet("console chaos", flag.ContinueOnError)
	return flags{
		fs:      fs,
		seconds: fs.Int("seconds", 60, "seconds of traffic and faults; the drain and the check come after"),
		seed:    fs.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the fault schedule, the destination's failures and the traffic"),
		faults:  fs.String("faults", strings.Join(AllFaults, ","), "comma-separated fault kinds to inject"),
		data:    fs.String("data", ".switchyard-chaos", "directory of the embedded cluster (without DATABASE_URL); the run restarts it"),
		work:    fs.String("work", "", "directory for the processes' logs (default: a new temporary directory)"),
		rate:    fs.Int("rate", 40, "business transactions per second (1–3 messages each)"),
	}
}

// DefinesFlag reports whether `console chaos` has a flag called name.
func DefinesFlag(name string) bool { return newFlags().fs.Lookup(name) != nil }

// Main is `console chaos [flags]`: it parses args, runs, and prints the
// summary as one JSON object, last. databaseURL is DATABASE_URL (empty:
// an embedded cluster under --data); env is the environment the console
// processes inherit (DATABASE_URL and the run's settings are added).
func Main(ctx context.Context, args []string, databaseURL string, env []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	f := newFlags()
	f.fs.SetOutput(stderr)
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	seconds, seed, faults, data, work, rate := f.seconds, f.seed, f.faults, f.data, f.work, f.rate
	binary, err := os.Executable()
	if err != nil {
		return fmt.Errorf("chaos: find the console binary: %w", err)
	}
	if *work == "" {
		if *work, err = os.MkdirTemp("", "switchyard-chaos-"); err != nil {
			return fmt.Errorf("chaos: work directory: %w", err)
		}
	}
	dataDir, err := filepath.Abs(*data)
	if err != nil {
		return fmt.Errorf("chaos: data directory: %w", err)
	}
	logger.Info("chaos run", slog.Uint64("seed", *seed), slog.Int("seconds", *seconds), slog.String("logs", *work))
	s, err := Run(ctx, Config{Binary: binary, Seconds: *seconds, Seed: *seed, Faults: strings.Split(*faults, ","),
		DatabaseURL: databaseURL, DataDir: dataDir, WorkDir: *work, Rate: *rate, Env: env, Logger: logger})
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	out, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("chaos: summary: %w", err)
	}
	fmt.Fprintln(stdout, string(out))
	if !s.Passed {
		return fmt.Errorf("%w: %s", ErrFailed, strings.Join(s.Failures, ", "))
	}
	return nil
}
