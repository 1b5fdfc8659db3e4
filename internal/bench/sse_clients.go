package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// runSSEClients is the child side of `console bench sse` (`console bench
// sse-clients`): it opens the clients, prints "connected" once every one
// has its ready event, then reads until each has received events changes
// (or ctx ends) and prints the latencies as one JSON line.
func runSSEClients(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("console bench sse-clients", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	url := fs.String("url", "", "the stream's URL")
	clients := fs.Int("clients", 1, "clients")
	events := fs.Int("events", 1, "changes to wait for")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" || *clients < 1 || *events < 1 {
		return errors.New("bench sse-clients: --url, --clients and --events are required")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}}
	var resyncs atomic.Int64
	latencies, err := fanInClients(ctx, *clients, out, func(onReady func()) []float64 {
		// A client that fails reports fewer events: the result's
		// received count shows it.
		lat, _ := readSSE(ctx, client, *url, *events, onReady, &resyncs)
		return lat
	})
	if err != nil {
		return err
	}
	line, _ := json.Marshal(map[string]any{"received": len(latencies), "resyncs": resyncs.Load(),
		"p50": percentileMs(latencies, 0.5), "p99": percentileMs(latencies, 0.99), "max": percentileMs(latencies, 1)})
	_, err = fmt.Fprintf(out, "%s\n", line)
	return err
}

// fanInClients runs n clients of a bench's child process at once, each
// watch returning the latencies (ms) it measured; it prints "connected"
// to out once every client has called its onReady, waits for all of them
// and returns every latency, sorted.
func fanInClients(ctx context.Context, n int, out io.Writer, watch func(onReady func()) []float64) ([]float64, error) {
	var ready atomic.Int64
	allReady := make(chan struct{})
	var mu sync.Mutex
	var latencies []float64 // guarded by mu
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			lat := watch(func() {
				if ready.Add(1) == int64(n) {
					close(allReady)
				}
			})
			mu.Lock()
			latencies = append(latencies, lat...)
			mu.Unlock()
		})
	}
	select {
	case <-allReady:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	fmt.Fprintln(out, "connected")
	wg.Wait()
	slices.Sort(latencies)
	return latencies, nil
}

// percentileMs is the q-quantile of sorted latencies, rounded to 0.01 ms;
// 0 when there are none.
func percentileMs(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return benchRound(sorted[min(len(sorted)-1, int(q*float64(len(sorted))))], 2)
}

// readSSE reads one stream until it has received want bench changes.
func readSSE(ctx context.Context, client *http.Client, url string, want int, onReady func(), resyncs *atomic.Int64) ([]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	var lat []float64
	var name string
	for len(lat) < want && lines.Scan() {
		line := lines.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			switch name {
			case "ready":
				onReady()
			case "resync":
				resyncs.Add(1)
			case sseBenchKind:
				var d struct {
					Payload struct {
						T int64 `json:"t"`
					} `json:"payload"`
				}
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d) == nil {
					lat = append(lat, float64(time.Now().UnixNano()-d.Payload.T)/1e6)
				}
			}
		}
	}
	return lat, lines.Err()
}

func runtimeCPUs() int { return runtime.NumCPU() }

func forceGC() { runtime.GC() }
