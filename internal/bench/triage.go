package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/internal/ws"
)

// triageBenchOptions are the flags of `console bench triage`.
type triageBenchOptions struct {
	clients     int
	mutations   int
	rate        int // mutations per second
	timeout     time.Duration
	heapProfile string // where to write the server's heap profile once the clients idle
}

// triageBenchResult is the JSON line `console bench triage` prints.
type triageBenchResult struct {
	Clients           int     `json:"clients"`
	Mutations         int     `json:"mutations"`
	Received          int64   `json:"received"` // states received over all clients (coalescing may fold some)
	P50Ms             float64 `json:"p50_ms"`   // commit to receipt by a client
	P99Ms             float64 `json:"p99_ms"`
	MaxMs             float64 `json:"max_ms"`
	RSSBytesPerClient int64   `json:"rss_bytes_per_client"` // the server's RSS growth per idle client
	// HeapBytesPerClient and StackBytesPerClient are what RSSBytesPerClient
	// is mostly made of: the growth of the live heap and of the goroutine
	// stacks.
	HeapBytesPerClient  int64  `json:"heap_bytes_per_client"`
	StackBytesPerClient int64  `json:"stack_bytes_per_client"`
	Method              string `json:"method"`
	CPUs                int    `json:"cpus"`
	LoadAverage         string `json:"load_average,omitempty"`
}

func parseTriageBenchOptions(args []string) (triageBenchOptions, error) {
	var o triageBenchOptions
	fs := flag.NewFlagSet("console bench triage", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&o.clients, "clients", 1000, "WebSocket clients on the board, in a child process")
	fs.IntVar(&o.mutations, "mutations", 200, "status mutations of one item")
	fs.IntVar(&o.rate, "rate", 20, "mutations per second")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up after this long")
	fs.StringVar(&o.heapProfile, "heap-profile", "", "write the server's heap profile here once the clients idle")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 || o.clients < 1 || o.mutations < 1 || o.rate < 1 || o.timeout <= 0 {
		return o, errors.New("want --clients, --mutations and --rate of 1 or more, a positive --timeout")
	}
	return o, nil
}

// runTriageBench measures the triage socket's fan-out: --clients sockets
// (a child process) watch one item on the board while --mutations status
// changes of it commit at --rate, each through triage.Engine.Mutate as the
// console runs it.
func runTriageBench(ctx context.Context, cfg Config, args []string, logger *slog.Logger) (any, error) {
	opts, err := parseTriageBenchOptions(args)
	if err != nil {
		return nil, fmt.Errorf("bench triage: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.timeout)
	defer cancel()
	env, err := openBenchEnv(ctx, cfg, benchOptions{enqueuers: 4}, logger)
	if err != nil {
		return nil, err
	}
	defer env.close(ctx, logger)
	pool := env.target.pool
	listener := changefeed.NewListener(pool, changefeed.Config{Logger: logger})
	if err := listener.Start(ctx); err != nil {
		return nil, err
	}
	defer listener.Stop()
	engine := &triage.Engine{Pool: pool, Notify: listener.Wake, Logger: logger}
	server := ws.New(ws.Config{Engine: engine, Presence: &triage.Presence{Pool: pool, Instance: "bench", Notify: listener.Wake}, Logger: logger})
	if err := server.Start(ctx); err != nil {
		return nil, err
	}
	defer server.Stop()
	_, unsubscribe := listener.Subscribe(server.Observe)
	defer unsubscribe()
	// The bench measures fan-out, not sign-in: every socket is a viewer
	// without a session.
	viewer := auth.Principal{Name: "bench", Role: auth.Viewer}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		server.Serve(w, r, viewer, "127.0.0.1", func(context.Context) (auth.Principal, error) { return viewer, nil })
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	item, err := triageBenchItem(ctx, pool)
	if err != nil {
		return nil, err
	}
	res, err := triageBenchRun(ctx, engine, item, "ws://"+ln.Addr().String()+"/ws", opts, logger)
	if err != nil {
		return nil, fmt.Errorf("bench triage: %w", err)
	}
	res.LoadAverage = env.load
	return res, nil
}

// triageBenchItem creates the item the clients watch.
func triageBenchItem(ctx context.Context, pool *pgxpool.Pool) (triage.Item, error) {
	ref := json.RawMessage(`{"bench": "` + uuid.NewString() + `"}`)
	var it triage.Item
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := triage.Track(ctx, tx, triage.ReconcileFindings, ref, "bench", "bench"); err != nil {
			return err
		}
		var err error
		it, err = triage.Find(ctx, tx, triage.ReconcileFindings, ref)
		return err
	})
	return it, err
}

// triageBenchRun starts the clients, measures the RSS growth once all are
// connected and idle, commits the mutations at the rate, and collects the
// child's latencies.
func triageBenchRun(ctx context.Context, engine *triage.Engine, item triage.Item, url string, opts triageBenchOptions, logger *slog.Logger) (triageBenchResult, error) {
	res := triageBenchResult{Clients: opts.clients, Mutations: opts.mutations, CPUs: runtimeCPUs(),
		Method: "clients in a child process, each on the board watching one item; latency = receipt time minus the item's updated_at (its mutation's transaction time, one clock); " +
			"rss = VmRSS growth of the server process from before the clients connected to after all were connected and idle, divided by clients; " +
			"each sample taken at rest: collections, the freed pages returned to the system, repeated until two samples a second apart agree within 1%"}
	before := settledMemory()
	exe, err := os.Executable()
	if err != nil {
		return res, err
	}
	child := exec.CommandContext(ctx, exe, "bench", "triage-clients", "--url", url, "--clients", strconv.Itoa(opts.clients),
		"--item", strconv.FormatInt(item.ID, 10), "--version", strconv.FormatInt(item.Version+int64(opts.mutations), 10))
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		return res, err
	}
	if err := child.Start(); err != nil {
		return res, err
	}
	defer func() { _ = child.Wait() }()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "connected" {
		return res, fmt.Errorf("the clients did not connect: %q", lines.Text())
	}
	idle := settledMemory()
	n := int64(opts.clients)
	res.RSSBytesPerClient = (idle.rss - before.rss) / n
	res.HeapBytesPerClient, res.StackBytesPerClient = (idle.heap-before.heap)/n, (idle.stacks-before.stacks)/n
	if err := writeHeapProfile(opts.heapProfile); err != nil {
		return res, fmt.Errorf("heap profile: %w", err)
	}
	if err := triageBenchMutate(ctx, engine, item, opts); err != nil {
		return res, err
	}
	if !lines.Scan() {
		return res, fmt.Errorf("the clients reported nothing: %v", lines.Err())
	}
	var got struct {
		Received      int64
		P50, P99, Max float64
	}
	if err := json.Unmarshal(lines.Bytes(), &got); err != nil {
		return res, fmt.Errorf("the clients' report: %w", err)
	}
	res.Received, res.P50Ms, res.P99Ms, res.MaxMs = got.Received, got.P50, got.P99, got.Max
	logger.Info("triage bench done", slog.Int64("received", got.Received))
	return res, nil
}

// triageBenchMutate moves the item between open and acknowledged, one
// mutation per tick.
func triageBenchMutate(ctx context.Context, engine *triage.Engine, item triage.Item, opts triageBenchOptions) error {
	operator := auth.Principal{Name: "bench-operator", Role: auth.Operator}
	tick := time.NewTicker(time.Second / time.Duration(opts.rate))
	defer tick.Stop()
	version := item.Version
	for i := range opts.mutations {
		to := triage.Acknowledged
		if i%2 == 1 {
			to = triage.Open
		}
		a, err := engine.Mutate(ctx, operator, triage.Input{MutationID: uuid.New(), ItemID: item.ID, Op: triage.OpStatus, Args: triage.Args{Status: to}, SeenVersion: version})
		if err != nil {
			return err
		}
		if !a.OK {
			return fmt.Errorf("mutation %d refused: %s", i, a.Message)
		}
		version = a.Item.Version
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C: // pacing the offered load, not waiting for a result
		}
	}
	return nil
}
