package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/internal/bench"
	"github.com/switchyard/switchyard/internal/inbox"
)

// config is everything the console reads from its environment and flags,
// read once here. A flag wins over its environment variable.
type config struct {
	command         string   // serve, migrate, help
	args            []string // the command's own arguments
	listen          string
	dataDir         string
	databaseURL     string
	databaseWait    time.Duration // serve, dispatch: how long to wait for DATABASE_URL at start (waitForever; 0: no wait)
	pgBinDir        string
	pgSearchRoots   []string
	logLevel        slog.Level
	logFormat       string
	shutdownTimeout time.Duration
	workers         int           // dispatcher workers; 0: serve runs none
	lease           time.Duration // dispatcher and bulk replay lease duration
	natsURL         string
	inboxMaxBody    int64 // bytes; larger inbox requests get 413
	// demo signs every loopback visitor in as a demo admin, with a banner;
	// refused on any address but loopback.
	demo bool
	// demoCheckInterval is how often `console demo` runs its
	// reconciliation checks.
	demoCheckInterval time.Duration
	// allowedHosts are the Host names the console answers to; nil: any
	// (demo mode: loopback names only).
	allowedHosts []string
	// secureCookies: the console is reached over TLS (__Host- cookies).
	secureCookies bool
	// viewerPayloads shows message payloads to viewers.
	viewerPayloads bool
	// sessionIdle and sessionMax end sessions (idle and absolute).
	sessionIdle, sessionMax time.Duration
	// web: the HTTP server's timeouts, connection caps and metrics
	// (config_web.go).
	web webConfig
	// getenv reads the secrets that destinations name (secret_ref); the
	// only environment access after start.
	getenv func(string) string
	// hardening: trusted proxies, audit anchors, retention (hardening.go).
	hardening hardening
	// handlers are the Go inbox handlers of the program that runs the
	// console (Options); started, when set, gets the console's base URL
	// once it serves.
	handlers inbox.Registry
	started  func(baseURL string)
	// triage: claim lease, presence expiry, the tests' ack delay
	// (triage.go).
	triage triageConfig
}

// setting documents one configuration knob; README.md's table lists these.
type setting struct {
	flag, env, def, help string
}

// switches are the settings that are on or off: --flag alone turns one on.
var switches = map[string]bool{"demo": true, "secure-cookies": true, "viewer-payloads": true}

var settings = []setting{
	{"listen", "SWITCHYARD_LISTEN", "127.0.0.1:8080", "address the console serves HTTP on"},
	{"data", "SWITCHYARD_DATA", ".switchyard", "directory for the embedded PostgreSQL cluster (used only without DATABASE_URL; console demo: " + demoDataDir + ")"},
	{"database-url", "DATABASE_URL", "", "PostgreSQL URL; when set, the console uses this server and starts none of its own"},
	{"database-wait", "SWITCHYARD_DATABASE_WAIT", "", "how long console dispatch and console serve wait at start for a DATABASE_URL they cannot reach, trying again with backoff and logging twice a minute: a duration, or forever (default: dispatch forever; serve 0s, the first failure ends it)"},
	{"pg-bin", "SWITCHYARD_PG_BIN", "", "directory with the postgres and initdb programs (default: pg_config --bindir, then /usr/lib/postgresql/*/bin)"},
	{"pg-search", "SWITCHYARD_PG_SEARCH", "/usr/lib/postgresql", "directories whose numbered subdirectories hold PostgreSQL installations (colon-separated)"},
	{"workers", "SWITCHYARD_WORKERS", "4", "dispatcher workers (console serve: 0 runs none)"},
	{"lease", "SWITCHYARD_LEASE", "30s", "how long a dispatcher holds a claimed message, and a bulk replay runner a job, before another may take it over"},
	{"nats-url", "SWITCHYARD_NATS_URL", "nats://127.0.0.1:4222", "NATS server for JetStream destinations"},
	{"inbox-max-body", "SWITCHYARD_INBOX_MAX_BODY", "1048576", "largest request body POST /inbox/{source} accepts, in bytes (larger: 413)"},
	{"demo", "SWITCHYARD_DEMO", "false", "demo sign-in only: every visitor from this machine is signed in as a demo admin, no traffic (loopback --listen only; a banner says so; for traffic too, run console demo)"},
	{"demo-check-interval", "SWITCHYARD_DEMO_CHECK_INTERVAL", "10s", "console demo: how often its two reconciliation checks run (1s or more)"},
	{"allowed-hosts", "SWITCHYARD_ALLOWED_HOSTS", "", "comma-separated host names the console answers to (empty: any; demo mode: loopback names only)"},
	{"secure-cookies", "SWITCHYARD_SECURE_COOKIES", "false", "the console is reached over HTTPS (directly or through a proxy): cookies are Secure with the __Host- prefix"},
	{"viewer-payloads", "SWITCHYARD_VIEWER_PAYLOADS", "false", "show message payloads to viewers (by default only operators and admins see them)"},
	{"session-idle", "SWITCHYARD_SESSION_IDLE", "30m", "a session unused this long ends"},
	{"session-max", "SWITCHYARD_SESSION_MAX", "12h", "a session ends this long after sign-in, used or not"},
	{"read-timeout", "SWITCHYARD_READ_TIMEOUT", "30s", "longest a request may take to arrive, body included (the live stream excepted)"},
	{"write-timeout", "SWITCHYARD_WRITE_TIMEOUT", "60s", "longest a response may take to be sent (the live stream bounds each write instead)"},
	{"idle-timeout", "SWITCHYARD_IDLE_TIMEOUT", "2m", "how long a kept-alive connection may wait for its next request"},
	{"max-conns-per-address", "SWITCHYARD_MAX_CONNS_PER_ADDRESS", "128", "most connections one client address may hold open; more are closed at once (behind a proxy, raise it to --max-conns)"},
	{"max-conns", "SWITCHYARD_MAX_CONNS", "2048", "most connections open at once; more are closed at once"},
	{"metrics-listen", "SWITCHYARD_METRICS_LISTEN", "", "serve /metrics on this address only, instead of the console's (empty: the console's); behind --metrics-token too, if set"},
	{"metrics-token", "SWITCHYARD_METRICS_TOKEN", "", "/metrics asks for Authorization: Bearer TOKEN (empty: public on a loopback --listen, not served on others unless on --metrics-listen)"},
	{"log-level", "SWITCHYARD_LOG_LEVEL", "info", "debug, info, warn or error"},
	{"log-format", "SWITCHYARD_LOG_FORMAT", "text", "text or json"},
	{"shutdown-timeout", "SWITCHYARD_SHUTDOWN_TIMEOUT", "10s", "how long requests in flight may take to finish at shutdown"},
	{"trusted-proxies", "SWITCHYARD_TRUSTED_PROXIES", "", "comma-separated CIDRs of the reverse proxies in front of the console: from them, the client address is taken from X-Forwarded-For (empty: never; the client is the peer)"},
	{"audit-key-file", "SWITCHYARD_AUDIT_KEY_FILE", "", "file holding the key (32 bytes or more) that seals the audit trail outside the database (empty: the chain stays unkeyed, and audit verify says so)"},
	{"audit-checkpoint-file", "SWITCHYARD_AUDIT_CHECKPOINT_FILE", "", "append-only file of audit trail checkpoints (default: audit-checkpoints.jsonl in --data)"},
	{"audit-checkpoint-rows", "SWITCHYARD_AUDIT_CHECKPOINT_ROWS", "1000", "write an audit checkpoint after this many new rows"},
	{"audit-checkpoint-interval", "SWITCHYARD_AUDIT_CHECKPOINT_INTERVAL", "5m", "write an audit checkpoint this often while rows are added (and at shutdown)"},
	{"idempotency-ttl", "SWITCHYARD_IDEMPOTENCY_TTL", "24h", "how long an Idempotency-Key and its stored response are kept; then retention deletes them"},
	{"retain-inbox-events", "SWITCHYARD_RETAIN_INBOX_EVENTS", "720h", "processed inbox events are deleted this long after receipt (failed, parked and held ones never)"},
	{"retain-breaker-events", "SWITCHYARD_RETAIN_BREAKER_EVENTS", "720h", "circuit breaker changes are deleted after this long (each breaker's latest is kept)"},
	{"retain-replay-jobs", "SWITCHYARD_RETAIN_REPLAY_JOBS", "720h", "finished bulk replay jobs are deleted this long after they finished"},
	{"retention-interval", "SWITCHYARD_RETENTION_INTERVAL", "5m", "how often retention runs"},
	{"retention-statement-timeout", "SWITCHYARD_RETENTION_STATEMENT_TIMEOUT", "30s", "longest any retention delete may run"},
	{"triage-lease", "SWITCHYARD_TRIAGE_LEASE", "5m", "how long a triage claim lasts on the database clock without a heartbeat from its holder's open page"},
	{"triage-presence-ttl", "SWITCHYARD_TRIAGE_PRESENCE_TTL", "30s", "how long a triage page's presence lasts without a refresh (refreshed every third of it, swept every sixth): a dead tab or instance disappears within this plus a sixth"},
	{"triage-ack-delay", "SWITCHYARD_TRIAGE_ACK_DELAY", "0s", "tests only: hold each triage answer this long after its commit before sending it (browser tests show the optimistic overlay)"},
}

var errHelp = errors.New("help requested")

// demoDataDir is `console demo`'s default --data, apart from the real
// console's.
const demoDataDir = ".switchyard-demo"

// parseConfig reads the command line (command first, then flags) and the
// environment through getenv.
func parseConfig(args []string, getenv func(string) string, usage io.Writer) (config, error) {
	cfg := config{command: "serve", getenv: getenv}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cfg.command, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("console "+cfg.command, flag.ContinueOnError)
	fs.SetOutput(usage)
	values := map[string]*string{}
	flags := map[string]*bool{}
	for _, s := range settings {
		def := s.def
		if s.flag == "data" && cfg.command == "demo" {
			// The demo's source, destination and messages must not turn
			// up in the real console afterwards: a data directory of its own.
			def = demoDataDir
		}
		if v := getenv(s.env); v != "" {
			def = v
		}
		if switches[s.flag] {
			on, err := strconv.ParseBool(def)
			if err != nil {
				return cfg, fmt.Errorf("invalid $%s %q: want true or false", s.env, def)
			}
			flags[s.flag] = fs.Bool(s.flag, on, s.help+" ($"+s.env+")")
			continue
		}
		values[s.flag] = fs.String(s.flag, def, s.help+" ($"+s.env+")")
	}
	fs.Usage = func() { printUsage(usage, fs) }
	parse := parseInterleaved
	switch cfg.command {
	case "bench":
		parse = parseBenchArgs // the bench's own flags pass through to it
	case "chaos":
		parse = parseChaosArgs // so do the chaos run's
	case "user":
		parse = parseUserArgs // so do `console user`'s (--role)
	}
	positional, err := parse(fs, args)
	if err != nil {
		return cfg, err
	}
	cfg.args = positional
	cfg.pgSearchRoots = filepath.SplitList(*values["pg-search"])
	cfg.listen = *values["listen"]
	cfg.dataDir = *values["data"]
	cfg.databaseURL = *values["database-url"]
	if cfg.databaseWait, err = parseDatabaseWait(cfg.command, *values["database-wait"]); err != nil {
		return cfg, err
	}
	cfg.pgBinDir = *values["pg-bin"]
	cfg.logFormat = *values["log-format"]
	if err := cfg.logLevel.UnmarshalText([]byte(*values["log-level"])); err != nil {
		return cfg, fmt.Errorf("invalid log level %q: want debug, info, warn or error", *values["log-level"])
	}
	if cfg.logFormat != "text" && cfg.logFormat != "json" {
		return cfg, fmt.Errorf("invalid log format %q: want text or json", cfg.logFormat)
	}
	d, err := time.ParseDuration(*values["shutdown-timeout"])
	if err != nil || d <= 0 {
		return cfg, fmt.Errorf("invalid shutdown timeout %q: want a positive duration such as 10s", *values["shutdown-timeout"])
	}
	cfg.shutdownTimeout = d
	if cfg.workers, err = strconv.Atoi(*values["workers"]); err != nil || cfg.workers < 0 {
		return cfg, fmt.Errorf("invalid workers %q: want a number, 0 or more", *values["workers"])
	}
	if cfg.lease, err = time.ParseDuration(*values["lease"]); err != nil || cfg.lease < time.Second {
		return cfg, fmt.Errorf("invalid lease %q: want a duration of 1s or more", *values["lease"])
	}
	cfg.natsURL = *values["nats-url"]
	if cfg.inboxMaxBody, err = strconv.ParseInt(*values["inbox-max-body"], 10, 64); err != nil || cfg.inboxMaxBody < 1 {
		return cfg, fmt.Errorf("invalid inbox max body %q: want a number of bytes, 1 or more", *values["inbox-max-body"])
	}
	if cfg.web, err = parseWeb(values); err != nil {
		return cfg, err
	}
	if err := parseAccess(&cfg, values, flags); err != nil {
		return cfg, err
	}
	cfg.triage, err = parseTriage(values)
	return cfg, err
}

// parseAccess reads the sign-in and session settings, then the
// hardening ones (hardening.go).
func parseAccess(cfg *config, values map[string]*string, flags map[string]*bool) error {
	cfg.demo = *flags["demo"]
	var err error
	if cfg.demoCheckInterval, err = time.ParseDuration(*values["demo-check-interval"]); err != nil || cfg.demoCheckInterval < time.Second {
		return fmt.Errorf("invalid demo check interval %q: want a duration of 1s or more", *values["demo-check-interval"])
	}
	cfg.secureCookies = *flags["secure-cookies"]
	cfg.viewerPayloads = *flags["viewer-payloads"]
	for _, h := range strings.Split(*values["allowed-hosts"], ",") {
		if h = strings.TrimSpace(h); h != "" {
			cfg.allowedHosts = append(cfg.allowedHosts, h)
		}
	}
	if cfg.sessionIdle, err = time.ParseDuration(*values["session-idle"]); err != nil || cfg.sessionIdle < time.Minute {
		return fmt.Errorf("invalid session idle timeout %q: want a duration of 1m or more", *values["session-idle"])
	}
	if cfg.sessionMax, err = time.ParseDuration(*values["session-max"]); err != nil || cfg.sessionMax < cfg.sessionIdle {
		return fmt.Errorf("invalid session lifetime %q: want a duration at least the idle timeout", *values["session-max"])
	}
	return parseHardening(cfg, values)
}

// parseInterleaved parses flags wherever they stand among the positional
// arguments: `console migrate down --database-url X` must not silently
// ignore the flag (flag.Parse stops at the first non-flag).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `Switchyard: reliable messaging on PostgreSQL, and its operations console.

Usage:
  console [serve] [flags]          run the web console (the default)
  console demo [flags]             the demo (make demo): the console with demo traffic, a flaky destination,
                                   a panel at /demo and demo sign-in, on its own data in .switchyard-demo
  console dispatch [flags]         run dispatcher workers only
  console migrate [up|down|status] [flags]
                                   apply, roll back one, or list migrations
  console chaos [flags]            real processes under seeded faults, then a history check (see console chaos -h)
  console user add --role viewer|operator|admin NAME
                                   create an account (the password is read from stdin or asked for)
  console user passwd NAME         set an account's password; ends its sessions
  console user disable NAME        stop an account from signing in; ends its sessions
  console audit verify             check the audit trail's hash chain
`)
	for _, b := range bench.Commands() {
		cmd := "console bench " + b.Usage
		if len(cmd) > 32 { // the summary goes under it, as above
			cmd += "\n" + strings.Repeat(" ", 34)
		}
		fmt.Fprintf(w, "  %-32s %s\n", cmd, b.Summary)
	}
	fmt.Fprint(w, `  console help                     show this help

Every bench works in a database of its own and prints one JSON object last.
Without DATABASE_URL the console runs its own PostgreSQL in --data.

Flags:
`)
	fs.PrintDefaults()
}
