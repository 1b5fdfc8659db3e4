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
	"github.com/switchyard/switchyard/web/static"
)

// inboxBenchOptions are the flags of `console bench inbox`.
type inboxBenchOptions struct {
	events      int           // requests sent, duplicates included
	duplicates  float64       // share of requests that repeat an earlier event
	concurrency int           // concurrent senders
	timeout     time.Duration // bounds the measured phase
	cpuProfile  string        // where to write a CPU profile of the measured phase; "": none
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
	return fs
}

func printInboxBenchUsage(w io.Writer) {
	fs := newInboxBenchFlags(&inboxBenchOptions{})
	fs.SetOutput(w)
	fmt.Fprint(w, `Usage: console bench inbox [flags]

Sends signed events (Standard Webhooks) to POST /inbox/{source} on an
in-process console, whose source uses the customer-upsert handler, in a
fresh database of its own (created on the server, dropped at the end), and
prints one JSON object as its last line.

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
}

// benchInbox runs one inbox bench in a database of its own.
func benchInbox(ctx context.Context, cfg Config, opts inboxBenchOptions, logger *slog.Logger) (inboxBenchResult, error) {
	env, err := openBenchEnv(ctx, cfg, benchOptions{enqueuers: opts.concurrency}, logger)
	if err != nil {
		return inboxBenchResult{}, err
	}
	defer env.close(ctx, logger)
	target := env.target
	cleanup, err := installDemo(ctx, target, logger)
	if err != nil {
		return inboxBenchResult{}, err
	}
	defer cleanup()
	run, err := newInboxBenchRun(target, opts, logger)
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
		MaxMs: benchMillis(m.latency.percentile(1)), Handler: "customer-upsert", Database: "created",
		CPUs: runtime.NumCPU(), LoadAverage: env.load, Settings: env.server,
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

func (t *benchTarget) inboxSource() string { return "bench-" + t.suffix }

func newInboxBenchRun(target *benchTarget, opts inboxBenchOptions, logger *slog.Logger) (*inboxBenchRun, error) {
	secret, err := newWebhookSecret()
	if err != nil {
		return nil, err
	}
	r := &inboxBenchRun{opts: opts, target: target, served: make(chan struct{})}
	if err := r.start(secret, logger); err != nil {
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
	path := "/inbox/" + r.target.inboxSource()
	r.requests = make([]benchRequest, r.opts.events)
	for i := range r.requests {
		if i > 0 && rand.Float64() < r.opts.duplicates {
			r.requests[i] = r.requests[rand.IntN(i)]
			r.duplicates++
			continue
		}
		id := fmt.Sprintf("%s-%d", r.target.inboxSource(), r.unique)
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
func (r *inboxBenchRun) start(secret string, logger *slog.Logger) error {
	quiet := slog.New(slog.DiscardHandler)
	registry := prometheus.NewRegistry()
	verifier, err := inbox.NewVerifier(inbox.SchemeStandardWebhooks, []string{secret}, 0)
	if err != nil {
		return err
	}
	receiver := inbox.NewReceiver(inbox.ReceiverConfig{
		Pool: r.target.pool, Handlers: inbox.Registry{customer.Name: customer.Registration(customer.Config{})}, Metrics: inbox.NewMetrics(registry),
		Sources: []inbox.Source{{Name: r.target.inboxSource(), Scheme: inbox.SchemeStandardWebhooks, Verifier: verifier, Handler: customer.Name}},
	})
	assets, err := static.New()
	if err != nil {
		return err
	}
	h := console.New(console.Deps{Logger: logger, Assets: assets, Gatherer: registry, Inbox: receiver})
	e, err := httpserver.New(httpserver.Config{Logger: quiet, Registerer: registry, RenderError: h.RenderError, AllowedHosts: httpserver.LoopbackHosts})
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
