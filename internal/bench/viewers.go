package bench

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/sse"
	"github.com/switchyard/switchyard/internal/stats"
	"github.com/switchyard/switchyard/web/static"
)

// viewersBenchResult is the JSON line `console bench viewers` prints.
type viewersBenchResult struct {
	Viewers               int       `json:"viewers"`
	Messages              int       `json:"messages"`
	MessagesPerSecAlone   float64   `json:"messages_per_sec_alone"`
	MessagesPerSecWatched float64   `json:"messages_per_sec_watched"`
	Ratio                 float64   `json:"ratio"`         // watched / alone
	LiveRequests          int64     `json:"live_requests"` // page, region and stream requests the viewers made while watched
	Rounds                int       `json:"rounds"`
	RoundsAlone           []float64 `json:"rounds_alone"` // messages per second of each round; the medians are reported above
	RoundsWatched         []float64 `json:"rounds_watched"`
	Method                string    `json:"method"`
	CPUs                  int       `json:"cpus"`
	LoadAverage           string    `json:"load_average,omitempty"`
}

type viewersBenchOptions struct {
	rounds   int
	viewers  int
	messages int
	timeout  time.Duration
}

func parseViewersBenchOptions(args []string) (viewersBenchOptions, error) {
	var o viewersBenchOptions
	fs := flag.NewFlagSet("console bench viewers", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&o.viewers, "viewers", 50, "live dashboards open during the watched run")
	fs.IntVar(&o.messages, "messages", 100000, "messages drained in each run")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds of (alone, watched); the medians are compared")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.viewers < 1 || o.messages < 1 || o.rounds < 1 {
		return o, errors.New("--viewers, --messages and --rounds must be 1 or more")
	}
	return o, nil
}

// runViewersBench drains the same backlog twice with the console's web
// stack (change-feed listener, SSE hub, statistics service, dashboard
// handlers) running: once with no browser, once with N simulated live
// dashboards, each holding /events?kind=stats open and fetching the
// dashboard's live region on every statistics change and every 10 s, as
// the page does.
func runViewersBench(ctx context.Context, cfg Config, args []string, logger *slog.Logger) (any, error) {
	opts, err := parseViewersBenchOptions(args)
	if err != nil {
		return nil, fmt.Errorf("bench viewers: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.timeout)
	defer cancel()
	res := viewersBenchResult{Viewers: opts.viewers, Messages: opts.messages, Rounds: opts.rounds, CPUs: runtimeCPUs(), LoadAverage: loadAverage(),
		Method: "bench dispatch's drain (noop destination, 4 workers, 1000 aggregates) alternately without and with N viewers, --rounds times, in one fresh database with the web stack and statistics service running throughout; each viewer loads the page, holds /events?kind=stats open and fetches /dashboard/live on every event and every 10 s; medians compared"}
	dopts, err := parseBenchOptions([]string{"--messages", fmt.Sprint(opts.messages), "--timeout", opts.timeout.String()})
	if err != nil {
		return nil, err
	}
	env, err := openBenchEnv(ctx, cfg, dopts, logger)
	if err != nil {
		return nil, err
	}
	defer env.close(ctx, logger)
	target := env.target
	base, stop, err := startBenchWeb(ctx, target, logger)
	if err != nil {
		return nil, fmt.Errorf("bench viewers: %w", err)
	}
	defer stop()
	var alone, watched []float64
	for range opts.rounds {
		a, w, n, err := viewersRound(ctx, target, dopts, base, opts.viewers, logger)
		if err != nil {
			return nil, fmt.Errorf("bench viewers: %w", err)
		}
		alone, watched = append(alone, benchRound(a, 0)), append(watched, benchRound(w, 0))
		res.LiveRequests += n
	}
	res.RoundsAlone, res.RoundsWatched = alone, watched
	slices.Sort(alone)
	slices.Sort(watched)
	res.MessagesPerSecAlone, res.MessagesPerSecWatched = benchRound(alone[len(alone)/2], 0), benchRound(watched[len(watched)/2], 0)
	res.Ratio = benchRound(res.MessagesPerSecWatched/res.MessagesPerSecAlone, 3)
	return res, nil
}

// viewersRound drains one backlog alone, then one with n viewers open.
func viewersRound(ctx context.Context, target *benchTarget, dopts benchOptions, base string, n int, logger *slog.Logger) (alone, watched float64, requests int64, err error) {
	if alone, err = drainOnce(ctx, target, dopts, logger); err != nil {
		return 0, 0, 0, fmt.Errorf("alone: %w", err)
	}
	var count atomic.Int64
	stopViewers, err := startViewers(ctx, base, n, &count)
	if err != nil {
		return 0, 0, 0, err
	}
	count.Store(0)
	watched, err = drainOnce(ctx, target, dopts, logger)
	requests = count.Load()
	stopViewers()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("watched: %w", err)
	}
	return alone, watched, requests, nil
}

// drainOnce seeds and drains one backlog and removes its rows afterwards,
// then vacuums the tables the drain wrote: benches that compare drains
// run several in a row, and without the vacuum each one started among the
// dead rows of those before (four rounds of bench reconcile drifted down
// by a third, the later side of each pair always the worse off).
func drainOnce(ctx context.Context, target *benchTarget, opts benchOptions, logger *slog.Logger) (float64, error) {
	run, err := newBenchRun(ctx, target, opts, logger)
	if err != nil {
		return 0, err
	}
	defer run.close()
	m, err := run.drain(ctx)
	if err != nil {
		return 0, err
	}
	if err := target.deleteRows(ctx); err != nil {
		return 0, err
	}
	if _, err := target.pool.Exec(ctx, `VACUUM (ANALYZE) switchyard.outbox, switchyard.outbox_aggregates, switchyard.delivery_stats`); err != nil {
		return 0, fmt.Errorf("vacuum after the drain: %w", err)
	}
	return float64(m.messages) / m.elapsed.Seconds(), nil
}

// startBenchWeb serves the console's handlers on a loopback port against
// the bench database, with the statistics service and the live pipeline.
func startBenchWeb(ctx context.Context, target *benchTarget, logger *slog.Logger) (string, func(), error) {
	quiet := logger.With(slog.String("component", "web"))
	listener := changefeed.NewListener(target.pool, changefeed.Config{Logger: quiet})
	if err := listener.Start(ctx); err != nil {
		return "", nil, err
	}
	hub := sse.New(listener, sse.Config{Logger: quiet})
	svc := stats.New(target.pool, stats.Config{Owner: "bench", Logger: quiet})
	if err := svc.Start(ctx); err != nil {
		return "", nil, err
	}
	assets, err := static.New()
	if err != nil {
		return "", nil, err
	}
	registry := prometheus.NewRegistry()
	// Demo mode: the viewers, on loopback, are signed in as the demo admin.
	h := console.New(console.Deps{Logger: quiet, Assets: assets, Gatherer: registry, Events: hub, DB: target.pool,
		Stats: stats.NewReader(target.pool, 0), Auth: auth.New(target.pool, auth.Config{}), AuditLog: audit.Log{DB: target.pool}, Demo: true})
	e, err := httpserver.New(httpserver.Config{Logger: quiet, Registerer: registry, RenderError: h.RenderError, AllowedHosts: httpserver.LoopbackHosts})
	if err != nil {
		return "", nil, err
	}
	h.Register(e)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() {
		hub.Close()
		_ = srv.Close()
		svc.Stop()
		listener.Stop()
	}, nil
}

// startViewers opens n simulated dashboards and returns once every one
// has its stream open.
func startViewers(ctx context.Context, base string, n int, requests *atomic.Int64) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	client := &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 2 * n},
		// A redirect (to the sign-in form) is an answer to report, not to follow.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	var wg sync.WaitGroup
	ready := make(chan error, n)
	for range n {
		wg.Go(func() { viewDashboard(ctx, client, base, ready, requests) })
	}
	for range n {
		select {
		case err := <-ready:
			if err != nil {
				cancel()
				wg.Wait()
				return nil, err
			}
		case <-ctx.Done():
			cancel()
			wg.Wait()
			return nil, ctx.Err()
		}
	}
	return func() { cancel(); wg.Wait() }, nil
}

// viewDashboard is one open dashboard: the page, its stream, and a fetch
// of the live region on every statistics event and every 10 s.
func viewDashboard(ctx context.Context, client *http.Client, base string, ready chan<- error, requests *atomic.Int64) {
	fetch := func(path string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			requests.Add(1)
		}
	}
	fetch("/")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events?kind=stats", nil)
	resp, err := client.Do(req)
	if err != nil {
		ready <- fmt.Errorf("open the stream: %w", err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		ready <- fmt.Errorf("open the stream: status %d", resp.StatusCode)
		return
	}
	go func() {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				fetch("/dashboard/live")
			}
		}
	}()
	lines := bufio.NewScanner(resp.Body)
	first := true
	for lines.Scan() {
		if name, ok := strings.CutPrefix(lines.Text(), "event: "); ok {
			if first && name == "ready" {
				ready <- nil
				first = false
			}
			fetch("/dashboard/live")
		}
	}
}
