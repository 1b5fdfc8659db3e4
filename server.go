package switchyard

import (
	"context"
	"io"
	"os"

	"github.com/switchyard/switchyard/internal/cli"
)

// Config configures Run.
type Config struct {
	// Args are a console command line: a command (serve, the default;
	// dispatch; migrate; user; audit; demo; bench) and its flags, as the
	// console binary takes them (`console help`; README.md lists every
	// setting). Nil: serve, with the settings of the environment.
	// For example {"serve", "--listen", "127.0.0.1:8080", "--workers", "8"}.
	Args []string
	// Getenv reads the settings' environment variables (DATABASE_URL,
	// SWITCHYARD_...) and the secrets that destinations and inbox sources
	// name; nil: os.Getenv.
	Getenv func(string) string
	// Handlers are the program's Go inbox handlers.
	Handlers Handlers
	// Stdin, Stdout and Stderr are the command's streams (the log goes to
	// Stderr); nil: the process's.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Started, when set, is called with the console's base URL
	// (http://host:port) once it serves, for the serve and demo commands.
	// It must not block.
	Started func(baseURL string)
}

// Run runs one console command inside this program, with this program's
// inbox handlers, until the command ends or ctx is cancelled; serve then
// drains HTTP requests and deliveries in flight and returns nil. Serve
// runs the web console, the dispatcher (unless --workers 0), the inbox
// receiver (POST /inbox/{source}) and the reconciler against the database
// of DATABASE_URL (--database-url), migrating it first; without one it
// starts an embedded PostgreSQL in --data, as the console binary does.
//
// Run is the console binary's own composition: the same flags, defaults,
// pages, security and shutdown. A command line that cannot be run (an
// unknown flag, an invalid setting) returns an error before anything
// starts.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Args == nil {
		cfg.Args = []string{"serve"}
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Stdin == nil {
		cfg.Stdin = os.Stdin
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	return cli.Execute(ctx, cfg.Args, cfg.Getenv, cfg.Stdin, cfg.Stdout, cfg.Stderr,
		cli.Options{Handlers: cfg.Handlers.internal(), Started: cfg.Started})
}

// Main is a program's whole main function when the program is a console
// of its own with its own inbox handlers: it runs the command of the
// process's arguments (as the console binary does: `prog serve`, `prog
// migrate`, `prog user add ...`), stops on SIGINT or SIGTERM, and exits
// with the command's status.
//
//	func main() {
//		switchyard.Main(switchyard.Handlers{}.Handle("crm", applyCRMEvent))
//	}
func Main(handlers Handlers) {
	os.Exit(cli.Main(cli.Options{Handlers: handlers.internal()}))
}
