package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/triage"
)

// triageItems is how many triage items the WebSocket clients watch.
const triageItems = 5

// createTriageItems tracks the run's triage items (reconciliation finding
// groups of a "chaos" check) and returns their ids.
func createTriageItems(ctx context.Context, pool *pgxpool.Pool) ([]int64, error) {
	var ids []int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for i := range triageItems {
			ref := fmt.Appendf(nil, `{"check": "chaos", "group": %d}`, i)
			if err := triage.Track(ctx, tx, triage.ReconcileFindings, ref, fmt.Sprintf("chaos group %d", i), "chaos run"); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, `SELECT id FROM switchyard.triage_items WHERE kind = $1 AND ref->>'check' = 'chaos' ORDER BY id`,
			string(triage.ReconcileFindings))
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create the triage items: %w", err)
	}
	return ids, nil
}

// triageWriter changes the items every interval until ctx ends: it
// resolves one (as an operator's mutation would: the read model, its
// event and its change row in one transaction) or tracks its failure
// again, which reopens a resolved item.
func triageWriter(ctx context.Context, pool *pgxpool.Pool, ids []int64, seed uint64, interval time.Duration) {
	rnd := rand.New(rand.NewPCG(seed, 7))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		i := rnd.IntN(len(ids))
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_ = pgx.BeginFunc(qctx, pool, func(tx pgx.Tx) error {
			if rnd.IntN(2) == 0 {
				ref := fmt.Appendf(nil, `{"check": "chaos", "group": %d}`, i)
				return triage.Track(qctx, tx, triage.ReconcileFindings, ref, fmt.Sprintf("chaos group %d", i), "chaos run")
			}
			var version int64
			err := tx.QueryRow(qctx, `UPDATE switchyard.triage_items SET status = 'resolved', version = version + 1, updated_at = now()
				WHERE id = $1 AND status <> 'resolved' RETURNING version`, ids[i]).Scan(&version)
			if err != nil {
				return err // pgx.ErrNoRows: resolved already; nothing changed
			}
			if _, err := tx.Exec(qctx, `INSERT INTO switchyard.triage_events (item_id, version, actor, op, detail)
				VALUES ($1, $2, 'chaos', 'status', '{"status": "resolved"}')`, ids[i], version); err != nil {
				return err
			}
			payload, _ := json.Marshal(map[string]any{"version": version, "status": "resolved"})
			return changefeed.Append(qctx, tx, changefeed.Change{Kind: changefeed.KindTriage, Subject: fmt.Sprint(ids[i]), Payload: payload})
		})
		_ = changefeed.Notify(qctx, pool)
		cancel()
	}
}

// wsClient is one WebSocket client of a console instance showing the
// triage board with the run's items: on every (re)connect and every
// "resync" it says hello and gets their state; then it follows their
// changes. Its view is each item's version.
type wsClient struct {
	url, origin string
	ids         []int64
	ready       chan struct{}
	readyOnce   sync.Once

	mu         sync.Mutex
	view       map[int64]int64 // guarded by mu
	reconnects int             // guarded by mu
	resyncs    int             // guarded by mu
}

func newWSClient(base string, ids []int64) *wsClient {
	return &wsClient{url: "ws" + strings.TrimPrefix(base, "http") + "/ws", origin: base, ids: ids,
		ready: make(chan struct{}), view: map[int64]int64{}}
}

func (c *wsClient) run(ctx context.Context) {
	for ctx.Err() == nil {
		c.follow(ctx)
		c.mu.Lock()
		c.reconnects++
		c.mu.Unlock()
		pause(ctx, 250*time.Millisecond) // the page's reconnect pace
	}
}

func (c *wsClient) follow(ctx context.Context) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	sock, _, err := websocket.Dial(dctx, c.url, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {c.origin}}})
	cancel()
	if err != nil {
		return
	}
	defer sock.CloseNow()
	sock.SetReadLimit(1 << 20)
	hello, _ := json.Marshal(map[string]any{"type": "hello", "view": "board", "items": c.ids})
	if sock.Write(ctx, websocket.MessageText, hello) != nil {
		return
	}
	for {
		_, data, err := sock.Read(ctx)
		if err != nil {
			return
		}
		var m struct {
			Type  string        `json:"type"`
			Items []triage.Item `json:"items"`
		}
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		switch m.Type {
		case "state":
			c.mu.Lock()
			for _, it := range m.Items {
				c.view[it.ID] = max(c.view[it.ID], it.Version)
			}
			c.mu.Unlock()
			c.readyOnce.Do(func() { close(c.ready) })
		case "resync":
			c.mu.Lock()
			c.resyncs++
			c.mu.Unlock()
			if sock.Write(ctx, websocket.MessageText, hello) != nil {
				return
			}
		}
	}
}

func (c *wsClient) snapshot() (view map[int64]int64, resyncs, reconnects int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	view = make(map[int64]int64, len(c.view))
	for id, v := range c.view {
		view[id] = v
	}
	return view, c.resyncs, c.reconnects
}

// checkSockets waits up to viewBound for every client's versions to equal
// the database's, and counts the clients that still differ.
func checkSockets(ctx context.Context, pool *pgxpool.Pool, clients []*wsClient, ids []int64) (viewVerdict, error) {
	rows, err := pool.Query(ctx, `SELECT id, version FROM switchyard.triage_items WHERE id = ANY($1)`, ids)
	if err != nil {
		return viewVerdict{}, fmt.Errorf("read the triage items: %w", err)
	}
	want := map[int64]int64{}
	var id, version int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &version}, func() error { want[id] = version; return nil }); err != nil {
		return viewVerdict{}, fmt.Errorf("read the triage items: %w", err)
	}
	v := viewVerdict{Clients: len(clients), Markers: len(want)}
	same := func(c *wsClient) bool {
		view, _, _ := c.snapshot()
		if len(view) != len(want) {
			return false
		}
		for id, ver := range want {
			if view[id] != ver {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(viewBound)
	for _, c := range clients {
		for !same(c) && time.Now().Before(deadline) {
			pause(ctx, 50*time.Millisecond)
		}
	}
	for _, c := range clients {
		_, resyncs, reconnects := c.snapshot()
		v.Resyncs += resyncs
		v.Reconnects += reconnects
		if !same(c) {
			v.Mismatched++
		}
	}
	return v, nil
}
