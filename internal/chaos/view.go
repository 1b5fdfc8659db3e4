package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/changefeed"
)

// viewKind is the change-feed kind of the markers the live-view check
// writes and its clients follow.
const viewKind = "chaos_view"

// viewBound is how soon after its commit a client must see a change once
// the faults have ended, and how soon after the last commit every client's
// view must equal the database.
const viewBound = 3 * time.Second

// recoveryGrace is how long after the last fault was undone the bound
// starts to hold: the instances first reconnect (a PostgreSQL restart
// takes up to 15 s on a loaded machine, and every pool and LISTEN
// connection backs off while it lasts).
const recoveryGrace = 10 * time.Second

// feedWriterApp is the application_name of the marker writer's sessions
// (through the proxy; the terminate fault may end them).
const feedWriterApp = "chaos-feed-writer"

// viewerApp is the application_name of the clients' page reloads.
const viewerApp = "chaos-viewer"

// feedWriter commits marker changes, each in a transaction of its own
// held open for a seeded while (concurrent writers, commits out of id
// order, now and then one held for seconds: the feed must deliver the
// others meanwhile), and records when each commit was acknowledged.
type feedWriter struct {
	pool *pgxpool.Pool
	wg   sync.WaitGroup

	mu    sync.Mutex
	acked map[int64]time.Time // guarded by mu
}

func (w *feedWriter) run(ctx context.Context, seed uint64, interval time.Duration) {
	rnd := rand.New(rand.NewPCG(seed, 5))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := int64(1); ; i++ {
		select {
		case <-ctx.Done():
			w.wg.Wait()
			return
		case <-tick.C:
		}
		hold := time.Duration(rnd.Int64N(int64(500 * time.Millisecond)))
		if rnd.IntN(50) == 0 {
			hold = 5 * time.Second
		}
		w.wg.Go(func() { w.one(context.WithoutCancel(ctx), i, hold) })
	}
}

func (w *feedWriter) one(ctx context.Context, i int64, hold time.Duration) {
	qctx, cancel := context.WithTimeout(ctx, hold+5*time.Second)
	defer cancel()
	err := pgx.BeginFunc(qctx, w.pool, func(tx pgx.Tx) error {
		payload, _ := json.Marshal(map[string]int64{"i": i})
		if err := changefeed.Append(qctx, tx, changefeed.Change{Kind: viewKind, Subject: strconv.FormatInt(i, 10), Payload: payload}); err != nil {
			return err
		}
		pause(qctx, hold)
		return nil
	})
	if err != nil {
		return // not acknowledged: the check asks the database
	}
	at := time.Now()
	w.mu.Lock()
	w.acked[i] = at
	w.mu.Unlock()
	_ = changefeed.Notify(qctx, w.pool) // a wake-up only: the instances poll too
}

func (w *feedWriter) acknowledged() map[int64]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int64]time.Time, len(w.acked))
	for i, at := range w.acked {
		out[i] = at
	}
	return out
}

// viewClient is one SSE client of a console instance, following the
// markers as a live page would: it resumes with Last-Event-ID after a lost
// connection, and on "resync" it reloads its view from the database (a
// page reload). Its view is the set of markers it shows.
type viewClient struct {
	url    string
	reload *pgxpool.Pool
	ready  chan struct{} // closed at the first "ready"

	mu         sync.Mutex
	view       map[int64]time.Time // guarded by mu; marker -> when seen live (zero: reloaded)
	lastID     string              // guarded by mu
	resyncs    int                 // guarded by mu
	reconnects int                 // guarded by mu
	readyOnce  sync.Once
}

func newViewClient(base string, reload *pgxpool.Pool) *viewClient {
	return &viewClient{url: base + "/events?kind=" + viewKind, reload: reload, ready: make(chan struct{}), view: map[int64]time.Time{}}
}

// run follows the stream until ctx ends, reconnecting after every loss.
func (c *viewClient) run(ctx context.Context) {
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	for ctx.Err() == nil {
		c.follow(ctx, client)
		c.mu.Lock()
		c.reconnects++
		c.mu.Unlock()
		pause(ctx, 250*time.Millisecond) // a browser's EventSource retry
	}
}

// follow reads one connection of the stream to its end.
func (c *viewClient) follow(ctx context.Context, client *http.Client) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return
	}
	c.mu.Lock()
	if c.lastID != "" {
		req.Header.Set("Last-Event-ID", c.lastID)
	}
	c.mu.Unlock()
	resp, err := client.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	var id, name, data string
	for lines.Scan() {
		line := lines.Text()
		switch {
		case line == "":
			if name != "" {
				c.event(ctx, id, name, data)
			}
			id, name, data = "", "", ""
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// event applies one event to the view.
func (c *viewClient) event(ctx context.Context, id, name, data string) {
	now := time.Now()
	switch name {
	case "ready":
		c.readyOnce.Do(func() { close(c.ready) })
	case "resync":
		markers, err := loadMarkers(ctx, c.reload)
		if err != nil {
			return // keep the old id: the next connection resyncs again
		}
		c.mu.Lock()
		c.resyncs++
		view := make(map[int64]time.Time, len(markers))
		for i := range markers {
			view[i] = time.Time{}
		}
		c.view = view
		c.mu.Unlock()
		c.readyOnce.Do(func() { close(c.ready) })
	case viewKind:
		var d struct {
			Subject string `json:"subject"`
		}
		if json.Unmarshal([]byte(data), &d) != nil {
			return
		}
		i, err := strconv.ParseInt(d.Subject, 10, 64)
		if err != nil {
			return
		}
		c.mu.Lock()
		if _, ok := c.view[i]; !ok {
			c.view[i] = now
		}
		c.mu.Unlock()
	}
	if id != "" {
		c.mu.Lock()
		c.lastID = id
		c.mu.Unlock()
	}
}

// snapshot returns a copy of the view and the client's counts.
func (c *viewClient) snapshot() (view map[int64]time.Time, resyncs, reconnects int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	view = make(map[int64]time.Time, len(c.view))
	for i, at := range c.view {
		view[i] = at
	}
	return view, c.resyncs, c.reconnects
}

// loadMarkers reads every marker the database holds.
func loadMarkers(ctx context.Context, pool *pgxpool.Pool) (map[int64]bool, error) {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := pool.Query(qctx, `SELECT subject FROM switchyard.changes WHERE kind = $1`, viewKind)
	if err != nil {
		return nil, err
	}
	subjects, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make(map[int64]bool, len(subjects))
	for _, s := range subjects {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			out[i] = true
		}
	}
	return out, nil
}

// viewVerdict is the live-view check's result.
type viewVerdict struct {
	Clients    int `json:"clients"`
	Markers    int `json:"markers"`
	Resyncs    int `json:"resyncs"`
	Reconnects int `json:"reconnects"`
	// Mismatched: clients whose view did not equal the database within
	// viewBound of the last commit. Fails the run.
	Mismatched int `json:"mismatched"`
	// Late: changes committed recoveryGrace after the faults ended or
	// later that a client saw live more than viewBound after their
	// commit. Fails the run.
	Late int `json:"late"`
	// MaxLatencyMs: the longest commit-to-client time of those changes.
	MaxLatencyMs float64 `json:"max_latency_ms_after_faults"`
}

// checkViews waits up to viewBound for every client's view to equal the
// database's markers, then counts the clients that differ and the markers
// committed after healed that a client saw late.
func checkViews(ctx context.Context, pool *pgxpool.Pool, clients []*viewClient, acked map[int64]time.Time, healed time.Time) (viewVerdict, error) {
	want, err := loadMarkers(ctx, pool)
	if err != nil {
		return viewVerdict{}, err
	}
	v := viewVerdict{Clients: len(clients), Markers: len(want)}
	deadline := time.Now().Add(viewBound)
	for _, c := range clients {
		for !sameView(c, want) && time.Now().Before(deadline) {
			pause(ctx, 50*time.Millisecond)
		}
	}
	for _, c := range clients {
		view, resyncs, reconnects := c.snapshot()
		v.Resyncs += resyncs
		v.Reconnects += reconnects
		if !sameView(c, want) {
			v.Mismatched++
		}
		for i, ackAt := range acked {
			seen, ok := view[i]
			if !ok || seen.IsZero() || ackAt.Before(healed.Add(recoveryGrace)) {
				continue
			}
			lat := max(seen.Sub(ackAt), 0)
			v.MaxLatencyMs = max(v.MaxLatencyMs, float64(lat.Microseconds())/1000)
			if lat > viewBound {
				v.Late++
			}
		}
	}
	return v, nil
}

func sameView(c *viewClient, want map[int64]bool) bool {
	view, _, _ := c.snapshot()
	if len(view) != len(want) {
		return false
	}
	for i := range view {
		if !want[i] {
			return false
		}
	}
	return true
}
