package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/demo/customer"
	"github.com/switchyard/switchyard/internal/destination/webhook"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/static"
)

// inboxBenchOptions are the flags of `console bench inbox`.
type inboxBenchOptions struct {
	events      int           // requests sent, duplicates included
	duplicates  float64       // share of requests that repeat an earlier event
	concurrency int           // concurrent senders
	timeout     time.Duration // bounds the measured phase
	cpuProfile  string        // where to write a CPU profile of the measured phase; "": none
	floor       bool          // side by side with the pgbench floor (inbox_floor.go)
	rounds      int           // with floor: rounds, each running both once
	handler     string        // the source's handler: customer.Name or inbox.HandlerForward
}

func newInboxBenchFlags(o *inboxBenchOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("console bench inbox", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.IntVar(&o.events, "events", 20000, "signed requests to send, duplicates included")
	fs.Float64Var(&o.duplicates, "duplicates", 0.1, "share of the requests that redeliver an earlier event (0 to 0.9)")
	fs.IntVar(&o.concurrency, "concurrency", 32, "concurrent senders, each with its own keep-alive connection")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up when the measured phase takes longer")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the measured phase (senders and receiver) to this file (go tool pprof)")
	fs.BoolVar(&o.floor, "floor", false, "side by side: run the inbox bench and its floor (pgbench doing only the inbox's essential SQL per event, same server, same clients, same event mix) by turns, and print both medians and the ratio")
	fs.IntVar(&o.rounds, "rounds", 3, "with --floor: rounds, each running the inbox and the floor once, in turns")
	fs.StringVar(&o.handler, "handler", customer.Name, "the source's handler: "+customer.Name+" (the demo's: creates or updates a customer) or "+
		inbox.HandlerForward+" (records the event and enqueues it to a destination in the same transaction, ordered per customer)")
	return fs
}

func printInboxBenchUsage(w io.Writer) {
	fs := newInboxBenchFlags(&inboxBenchOptions{})
	fs.SetOutput(w)
	fmt.Fprint(w, `Usage: console bench inbox [flags]

Sends signed events (Standard Webhooks) to POST /inbox/{source} on an
in-process console, whose source uses the customer-upsert handler (a Go
handler whose events, without a version, are received in one statement of
its own: inbox.Registration.Once), or, with --handler forward, the
built-in forward handler, configured as a row of switchyard.inbox_sources,
in a fresh database of its own (created on
the server, dropped at the end), and prints one JSON object as its last
line.

With --floor it runs, by turns in one database, the inbox bench and its
floor: pgbench (found beside the server binaries) with as many clients,
each event one transaction of the inbox's essential SQL (the claim with ON
CONFLICT DO NOTHING, then the handler's one statement), and prints both
medians and the ratio (BENCHMARKS.md, "The inbox against its floor").

Flags:
`)
	fs.PrintDefaults()
}

func parseInboxBenchOptions(args []string) (inboxBenchOptions, error) {
	var o inboxBenchOptions
	fs := newInboxBenchFlags(&o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.events < 1 || o.concurrency < 1:
		return o, errors.New("--events and --concurrency must be 1 or more")
	case o.duplicates < 0 || o.duplicates > 0.9:
		return o, errors.New("--duplicates must be between 0 and 0.9")
	case o.timeout <= 0:
		return o, errors.New("--timeout must be positive")
	case o.rounds < 1:
		return o, errors.New("--rounds must be 1 or more")
	case o.floor && o.cpuProfile != "":
		return o, errors.New("--cpuprofile profiles one run: not with --floor")
	case o.handler != customer.Name && o.handler != inbox.HandlerForward:
		return o, fmt.Errorf("--handler must be %s or %s", customer.Name, inbox.HandlerForward)
	}
	return o, nil
}

// inboxBenchResult is the JSON line of `console bench inbox`. Fields
// without omitempty are the contract BENCHMARKS.md and scripts read.
type inboxBenchResult struct {
	Events       int           `json:"events"`     // requests sent
	Duplicates   int           `json:"duplicates"` // of which redeliveries
	Concurrency  int           `json:"concurrency"`
	Seconds      float64       `json:"seconds"`
	EventsPerSec float64       `json:"events_per_sec"`
	P50Ms        float64       `json:"p50_ms"` // request sent to response read
	P99Ms        float64       `json:"p99_ms"`
	MaxMs        float64       `json:"max_ms"`
	Handler      string        `json:"handler"`
	Database     string        `json:"database"` // created or in_place, as for bench dispatch
	CPUs         int           `json:"cpus"`
	LoadAverage  string        `json:"load_average,omitempty"`
	Settings     benchSettings `json:"settings"`
	// CPU is the measured phase's CPU per 1,000 requests (duplicates
	// included): the figure to compare between builds on a shared machine.
	CPU *benchCPU `json:"cpu,omitempty"`
	// self and cluster are the measured phase's CPU time of this process
	// and of the whole server (inboxMeasurement), for the floor's side by
	// side.
	self, cluster time.Duration
}

// benchInbox runs one inbox bench in a database of its own.
func benchInbox(ctx context.Context, cfg Config, opts inboxBenchOptions, logger *slog.Logger) (inboxBenchResult, error) {
	env, err := openBenchEnv(ctx, cfg, benchOptions{enqueuers: opts.concurrency}, logger)
	if err != nil {
		return inboxBenchResult{}, err
	}
	defer env.close(ctx, logger)
	install := installDemo
	if opts.handler == inbox.HandlerForward {
		install = installForward
	}
	cleanup, err := install(ctx, env.target, logger)
	if err != nil {
		return inboxBenchResult{}, err
	}
	defer cleanup()
	return inboxOnce(ctx, env, opts, env.target.inboxSource(), logger)
}

// inboxOnce runs the inbox bench once in env's database, with source,
// and checks its effect.
func inboxOnce(ctx context.Context, env *benchEnv, opts inboxBenchOptions, source string, logger *slog.Logger) (inboxBenchResult, error) {
	target := env.target
	run, err := newInboxBenchRun(ctx, target, source, opts, logger)
	if err != nil {
		return inboxBenchResult{}, err
	}
	defer run.close()
	m, err := run.measure(ctx)
	if err != nil {
		return inboxBenchResult{}, err
	}
	if err := run.check(ctx); err != nil {
		return inboxBenchResult{}, err
	}
	r := inboxBenchResult{
		Events: opts.events, Duplicates: run.duplicates, Concurrency: opts.concurrency,
		Seconds:      benchRound(m.elapsed.Seconds(), 3),
		EventsPerSec: benchRound(float64(opts.events)/m.elapsed.Seconds(), 0),
		P50Ms:        benchMillis(m.latency.percentile(0.50)), P99Ms: benchMillis(m.latency.percentile(0.99)),
		MaxMs: benchMillis(m.latency.percentile(1)), Handler: opts.handler, Database: "created",
		CPUs: runtime.NumCPU(), LoadAverage: env.load, Settings: env.server, CPU: &m.cpu,
		self: m.self, cluster: m.cluster,
	}
	if !target.created {
		r.Database = "in_place"
	}
	return r, nil
}

// inboxBenchRun is one run: the console serving the inbox on a loopback
// port, and the signed requests prepared before the clock starts.
type inboxBenchRun struct {
	opts       inboxBenchOptions
	target     *benchTarget
	source     string // the run's inbox source; customers' ids start with it
	addr       string // the receiver's host:port
	requests   []benchRequest
	unique     int
	duplicates int
	server     *http.Server
	served     chan struct{}
}

type benchRequest struct {
	id   string
	wire []byte // the whole HTTP request, as sent
}

// inboxSource is the bench's inbox source; every source of a side by side
// (inboxSource()-inbox-1, ...-floor-1, ...) starts with it and a dash.
func (t *benchTarget) inboxSource() string { return "bench-" + t.suffix }

func newInboxBenchRun(ctx context.Context, target *benchTarget, source string, opts inboxBenchOptions, logger *slog.Logger) (*inboxBenchRun, error) {
	secret, err := newWebhookSecret()
	if err != nil {
		return nil, err
	}
	r := &inboxBenchRun{opts: opts, target: target, source: source, served: make(chan struct{})}
	if err := r.start(ctx, secret, logger); err != nil {
		return nil, err
	}
	if err := r.prepare(secret); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// prepare signs every request: a new customer each, except a --duplicates
// share that repeats an earlier event, picked at random.
func (r *inboxBenchRun) prepare(secret string) error {
	now := time.Now()
	path := "/inbox/" + r.source
	r.requests = make([]benchRequest, r.opts.events)
	for i := range r.requests {
		if i > 0 && rand.Float64() < r.opts.duplicates {
			r.requests[i] = r.requests[rand.IntN(i)]
			r.duplicates++
			continue
		}
		id := fmt.Sprintf("%s-%d", r.source, r.unique)
		body := fmt.Appendf(nil, `{"customer": {"id": %q, "name": "Customer %d", "email": "c%d@example.com"}}`, id, r.unique, r.unique)
		sig, err := webhook.Sign(secret, id, now, body)
		if err != nil {
			return err
		}
		r.requests[i] = benchRequest{id: id, wire: r.inboxRequest(path, id, now, sig, body)}
		r.unique++
	}
	return nil
}

// inboxRequest is a signed Standard Webhooks request as it goes on the
// wire, to host r.addr.
func (r *inboxBenchRun) inboxRequest(path, id string, ts time.Time, signature string, body []byte) []byte {
	b := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"webhook-id: %s\r\nwebhook-timestamp: %d\r\nwebhook-signature: %s\r\nContent-Length: %d\r\n\r\n",
		path, r.addr, id, ts.Unix(), signature, len(body))
	return append(b, body...)
}

// start serves the console's routes, as console serve wires them, with the
// bench's source. Request logs below warn are dropped: at thousands of
// requests a second they would measure the terminal.
func (r *inboxBenchRun) start(ctx context.Context, secret string, logger *slog.Logger) error {
	quiet := slog.New(slog.DiscardHandler)
	registry := prometheus.NewRegistry()
	receiver, err := r.receiver(ctx, secret, registry)
	if err != nil {
		return err
	}
	assets, err := static.New()
	if err != nil {
		return err
	}
	h := console.New(console.Deps{Logger: logger, Assets: assets, Gatherer: registry, Inbox: receiver})
	e, err := httpserver.New(httpserver.Config{
		Logger: quiet, Registerer: registry, RenderError: h.RenderError, AllowedHosts: httpserver.LoopbackHosts,
		BodyLimit: h.BodyLimit, Streaming: console.Streaming, ForPrograms: console.ForPrograms,
	})
	if err != nil {
		return err
	}
	h.Register(e)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	r.addr = ln.Addr().String()
	r.server = &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(r.served)
		_ = r.server.Serve(ln)
	}()
	return nil
}

// receiver is the bench's inbox receiver. The customer-upsert source is
// given to it as a Go handler's; a forward source is read from its row of
// switchyard.inbox_sources (installForward), as console serve reads it,
// with its secret reference resolved to secret.
func (r *inboxBenchRun) receiver(ctx context.Context, secret string, registry *prometheus.Registry) (*inbox.Receiver, error) {
	cfg := inbox.ReceiverConfig{
		Pool: r.target.pool, Handlers: inbox.Registry{customer.Name: customer.Registration(customer.Config{})}, Metrics: inbox.NewMetrics(registry),
	}
	if r.opts.handler == inbox.HandlerForward {
		cfg.Getenv = func(name string) string {
			if name == forwardSecretRef {
				return secret
			}
			return ""
		}
		row, err := queries.New(r.target.pool).InboxSourceGet(ctx, r.source)
		if err != nil {
			return nil, fmt.Errorf("read the bench's forward source: %w", err)
		}
		if problem := inbox.SourceFromRow(row, cfg.Getenv).Problem; problem != nil {
			return nil, fmt.Errorf("the bench's forward source: %w", problem)
		}
		receiver := inbox.NewReceiver(cfg)
		if err := receiver.Load(ctx); err != nil {
			return nil, err
		}
		return receiver, nil
	}
	verifier, err := inbox.NewVerifier(inbox.SchemeStandardWebhooks, []string{secret}, 0)
	if err != nil {
		return nil, err
	}
	cfg.Sources = []inbox.Source{{Name: r.source, Scheme: inbox.SchemeStandardWebhooks, Verifier: verifier, Handler: customer.Name}}
	return inbox.NewReceiver(cfg), nil
}

func (r *inboxBenchRun) close() {
	if r.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.server.Shutdown(ctx); err != nil {
			_ = r.server.Close()
		}
		<-r.served
	}
}
