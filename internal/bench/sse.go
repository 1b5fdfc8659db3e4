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
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/sse"
)

// sseBenchKind is the change-feed kind the SSE bench writes and listens to.
const sseBenchKind = "bench_sse"

// sseBenchOptions are the flags of `console bench sse`.
type sseBenchOptions struct {
	clients  int
	events   int
	interval time.Duration
	timeout  time.Duration
	// dispatchRate > 0 runs a dispatch load beside the pipeline: messages
	// enqueued and delivered per second (sseDispatchLoad).
	dispatchRate int
}

// sseBenchResult is the JSON line `console bench sse` prints.
type sseBenchResult struct {
	Clients           int     `json:"clients"`
	Events            int     `json:"events"`
	Received          int64   `json:"received"` // events received over all clients (clients * events when none was lost)
	Resyncs           int64   `json:"resyncs"`
	P50Ms             float64 `json:"p50_ms"` // commit to receipt by a client
	P99Ms             float64 `json:"p99_ms"`
	MaxMs             float64 `json:"max_ms"`
	RSSBytesPerClient int64   `json:"rss_bytes_per_client"` // the server process's RSS growth per idle client
	Method            string  `json:"method"`
	CPUs              int     `json:"cpus"`
	LoadAverage       string  `json:"load_average,omitempty"`
	// DispatchRate is the offered dispatch load (--dispatch-rate; 0:
	// none) and DispatchPerSec the deliveries per second actually
	// achieved while the events were committed and received.
	DispatchRate   int     `json:"dispatch_rate"`
	DispatchPerSec float64 `json:"dispatch_per_sec"`
	DispatchMethod string  `json:"dispatch_method,omitempty"`
}

func parseSSEBenchOptions(args []string) (sseBenchOptions, error) {
	var o sseBenchOptions
	fs := flag.NewFlagSet("console bench sse", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&o.clients, "clients", 2000, "concurrent SSE clients (run in a child process, so the server's memory is measured alone)")
	fs.IntVar(&o.events, "events", 50, "changes committed, one transaction each")
	fs.DurationVar(&o.interval, "interval", 100*time.Millisecond, "time between two commits")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up after this long")
	fs.IntVar(&o.dispatchRate, "dispatch-rate", 0, "while the changes are committed, enqueue this many messages per second and deliver them to a noop destination in this process (0: no dispatch load)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.clients < 1 || o.events < 1 || o.interval < 0 {
		return o, errors.New("--clients and --events must be 1 or more")
	}
	if o.dispatchRate < 0 {
		return o, errors.New("--dispatch-rate must be 0 or more")
	}
	return o, nil
}

// runSSEBench measures the live pipeline end to end: a change committed
// to the feed, read by the process's one Listener, fanned out by the hub,
// received by every client. The server (listener, hub, HTTP) runs in this
// process; the clients run in a child process (`console bench
// sse-clients`), so the RSS growth measured here is the server's own.
func runSSEBench(ctx context.Context, cfg Config, args []string, logger *slog.Logger) (any, error) {
	opts, err := parseSSEBenchOptions(args)
	if err != nil {
		return nil, fmt.Errorf("bench sse: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.timeout)
	defer cancel()
	var dispatch benchOptions
	if opts.dispatchRate > 0 {
		if dispatch, err = sseDispatchOptions(opts.dispatchRate, opts.events, opts.interval, opts.timeout); err != nil {
			return nil, fmt.Errorf("bench sse: %w", err)
		}
	}
	env, err := openBenchEnv(ctx, cfg, benchOptions{enqueuers: 4 + dispatch.enqueuers}, logger)
	if err != nil {
		return nil, err
	}
	defer env.close(ctx, logger)
	target := env.target
	listener := changefeed.NewListener(target.pool, changefeed.Config{Logger: logger})
	if err := listener.Start(ctx); err != nil {
		return nil, err
	}
	defer listener.Stop()
	hub := sse.New(listener, sse.Config{Logger: logger, QueueSize: 64})
	defer hub.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: hub, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	r, err := sseBenchRun(ctx, target, hub, "http://"+ln.Addr().String()+"/?kind="+sseBenchKind, opts, dispatch, logger)
	if err != nil {
		return nil, fmt.Errorf("bench sse: %w", err)
	}
	r.LoadAverage = env.load
	return r, nil
}

// sseBenchRun starts the clients, waits until all are connected and idle,
// measures the RSS growth, commits the events and collects the child's
// latencies.
func sseBenchRun(ctx context.Context, target *benchTarget, hub *sse.Hub, url string, opts sseBenchOptions, dispatch benchOptions, logger *slog.Logger) (sseBenchResult, error) {
	pool := target.pool
	res := sseBenchResult{Clients: opts.clients, Events: opts.events, CPUs: runtimeCPUs(), DispatchRate: opts.dispatchRate,
		Method: "clients in a child process; latency = receipt time minus the time just before COMMIT (one clock); rss = VmRSS growth of the server process from before the clients connected to after all were connected and idle (GC run first), divided by clients"}
	before := rss()
	exe, err := os.Executable()
	if err != nil {
		return res, err
	}
	child := exec.CommandContext(ctx, exe, "bench", "sse-clients", "--url", url, "--clients", strconv.Itoa(opts.clients), "--events", strconv.Itoa(opts.events))
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
	idle := rss()
	res.RSSBytesPerClient = (idle - before) / int64(opts.clients)
	logger.Info("clients connected", slog.Int("clients", hub.Clients()), slog.Int64("rss_growth_bytes", idle-before))
	var load *sseDispatchLoad
	if opts.dispatchRate > 0 {
		res.DispatchMethod = "same process as the hub, as console serve runs it: bench dispatch's offered load (one transaction per enqueue, the in-process dispatcher woken after each commit, " +
			"16 enqueuers, 4 workers, 1000 aggregates, noop destination) plus the statistics leader; dispatch_per_sec = deliveries accepted by the destination " +
			"from the first commit of a change to the last change's receipt, divided by that time"
		if load, err = startSSEDispatchLoad(ctx, target, dispatch, logger); err != nil {
			return res, err
		}
		defer load.close()
	}
	var first time.Time
	var deliveredBefore int64
	if load != nil {
		first, deliveredBefore = time.Now(), load.delivered()
	}
	for i := range opts.events {
		if err := commitBenchChange(ctx, pool, i); err != nil {
			return res, err
		}
		time.Sleep(opts.interval) // pacing the offered load, not waiting for a result
	}
	if !lines.Scan() {
		return res, fmt.Errorf("the clients reported nothing: %v", lines.Err())
	}
	var got struct {
		Received, Resyncs int64
		P50, P99, Max     float64
	}
	if err := json.Unmarshal(lines.Bytes(), &got); err != nil {
		return res, fmt.Errorf("the clients' report: %w", err)
	}
	res.Received, res.Resyncs = got.Received, got.Resyncs
	res.P50Ms, res.P99Ms, res.MaxMs = got.P50, got.P99, got.Max
	if load != nil {
		res.DispatchPerSec = benchRound(float64(load.delivered()-deliveredBefore)/time.Since(first).Seconds(), 0)
		if err := load.wait(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// commitBenchChange appends one change carrying the time just before its
// commit, commits, and sends the wake-up after the commit.
func commitBenchChange(ctx context.Context, pool *pgxpool.Pool, i int) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		payload, _ := json.Marshal(map[string]int64{"t": time.Now().UnixNano(), "i": int64(i)})
		return changefeed.Append(ctx, tx, changefeed.Change{Kind: sseBenchKind, Subject: strconv.Itoa(i), Payload: payload})
	})
	if err != nil {
		return fmt.Errorf("commit change %d: %w", i, err)
	}
	return changefeed.Notify(ctx, pool)
}

// rss is this process's resident set size after a GC, from /proc.
func rss() int64 {
	forceGC()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
