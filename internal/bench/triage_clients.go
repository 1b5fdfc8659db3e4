package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/coder/websocket"
)

// runTriageClients is the child process of `console bench triage`: it
// opens --clients sockets on the board watching --item, prints
// "connected" once each has its first state, then reads states until each
// has seen --version, and prints the latencies as one JSON line.
func runTriageClients(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("console bench triage-clients", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	url := fs.String("url", "", "the socket's URL")
	clients := fs.Int("clients", 1, "clients")
	item := fs.Int64("item", 0, "the item to watch")
	last := fs.Int64("version", 0, "the version to wait for")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" || *clients < 1 || *item < 1 {
		return errors.New("bench triage-clients: --url, --clients and --item are required")
	}
	latencies, err := fanInClients(ctx, *clients, out, func(onReady func()) []float64 {
		for {
			// A client that fails after its first state reports fewer
			// states: received shows it. One that fails before it (on a
			// loaded machine, a server that took longer than its
			// ReadHeaderTimeout to read the upgrade) connects again: else
			// "connected" would never be printed and the bench would
			// wait for its timeout.
			ready := false
			lat, err := watchTriage(ctx, *url, *item, *last, func() { ready = true; onReady() })
			if ready || ctx.Err() != nil {
				return lat
			}
			fmt.Fprintf(os.Stderr, "triage client: failed before its first state, connecting again: %v\n", err)
			time.Sleep(100 * time.Millisecond) // a bench's pacing of a retry, not a wait for a signal
		}
	})
	if err != nil {
		return err
	}
	line, _ := json.Marshal(map[string]any{"received": len(latencies),
		"p50": percentileMs(latencies, 0.5), "p99": percentileMs(latencies, 0.99), "max": percentileMs(latencies, 1)})
	_, err = fmt.Fprintf(out, "%s\n", line)
	return err
}

// watchTriage reads one socket until the item reaches version last,
// returning the latency of each state after the first.
func watchTriage(ctx context.Context, url string, item, last int64, onReady func()) ([]float64, error) {
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	defer c.CloseNow()
	hello, _ := json.Marshal(map[string]any{"type": "hello", "view": "board", "items": []int64{item}})
	if err := c.Write(ctx, websocket.MessageText, hello); err != nil {
		return nil, err
	}
	var lat []float64
	first, seen := true, int64(0)
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return lat, err
		}
		now := time.Now()
		var m struct {
			Type  string `json:"type"`
			Items []struct {
				Version   int64     `json:"version"`
				UpdatedAt time.Time `json:"updated_at"`
			} `json:"items"`
		}
		if json.Unmarshal(data, &m) != nil || m.Type != "state" || len(m.Items) == 0 {
			continue
		}
		it := m.Items[0]
		if first {
			first, seen = false, it.Version
			onReady()
			continue
		}
		if it.Version <= seen {
			continue // a state sent twice (a resync): the page ignores it too
		}
		seen = it.Version
		lat = append(lat, float64(now.Sub(it.UpdatedAt).Microseconds())/1000)
		if it.Version >= last {
			return lat, nil
		}
	}
}
