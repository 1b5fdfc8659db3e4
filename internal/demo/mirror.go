package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/demo/demodb"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/reconcile"
	"github.com/switchyard/switchyard/internal/reconcile/fakeremote"
)

// The demo's reconciliation checks (internal/reconcile): its orders
// against the external shop that mirrors them, and its webhook deliveries
// against the receiver that keeps what it accepted.
const (
	OrdersCheck     = "demo-orders"
	DeliveriesCheck = "demo-deliveries"
)

// mirror is the demo's external system: two in-process fake providers
// (the documented lookup contract, docs/reconcile.md) that mirror the
// demo's orders and the deliveries its flaky receiver accepted, until the
// panel injects drift into them. It is safe for concurrent use.
type mirror struct {
	// writing is held (Lock) by the order writer around each transaction
	// and its telling the shop of the orders it committed, and by the
	// shop's provider (RLock) while it answers a lookup: a cycle never
	// sees an order on one side only, neither committed here and unknown
	// there (missing_remote) nor known there and in flight here
	// (missing_local; a bulk repair would then delete it remotely, and
	// make the drift it claimed).
	writing sync.RWMutex

	mu sync.Mutex
	// orders and hooks are nil until start; guarded by mu.
	orders, hooks *fakeremote.Provider

	lastOrder int64           // guarded by mu: the newest order mirrored
	delivered []string        // guarded by mu: the keys the receiver accepted, once each
	listed    map[string]bool // guarded by mu: the keys in delivered
	added     int             // guarded by mu: extra entities added so far
}

// start starts the providers until ctx ends.
func (m *mirror) start(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.orders, m.hooks = fakeremote.New(), fakeremote.New()
	m.listed = map[string]bool{}
	m.orders.Hold(m.writing.RLocker())
	orders, hooks := m.orders, m.hooks
	context.AfterFunc(ctx, func() { orders.Close(); hooks.Close() })
}

// providers returns the providers, or nils before start.
func (m *mirror) providers() (orders, hooks *fakeremote.Provider) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.orders, m.hooks
}

// accepted records a delivery the receiver accepted, by its webhook-id
// (the message's idempotency key). A repair of the orders check (its
// payload, docs/reconcile.md: {"key", "fields"} or {"key", "deleted"})
// is applied to the shop's copy, as the real system would, so that the
// next cycle resolves its finding.
func (m *mirror) accepted(key string, body []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if key == "" || m.hooks == nil {
		return
	}
	m.hooks.Put(key, nil)
	if !m.listed[key] { // once, however often redelivered: losing n deliveries loses n keys
		m.listed[key] = true
		m.delivered = append(m.delivered, key)
	}
	var repair struct {
		Key     string         `json:"key"`
		Fields  map[string]any `json:"fields"`
		Deleted bool           `json:"deleted"`
	}
	switch {
	case json.Unmarshal(body, &repair) != nil || repair.Key == "":
	case repair.Deleted:
		m.orders.Drop(repair.Key)
	case repair.Fields != nil:
		m.orders.Put(repair.Key, repair.Fields)
	}
}

// order tells the shop of an order written (committed).
func (m *mirror) order(id int64, customer string, amountCents int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.orders == nil {
		return
	}
	m.orders.Put(strconv.FormatInt(id, 10), map[string]any{"customer": customer, "amount_cents": amountCents})
	m.lastOrder = max(m.lastOrder, id)
}

// follow copies the orders of earlier runs to the provider at start, and
// any written since by others every quarter second, until ctx ends.
func (m *mirror) follow(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := m.copyOrders(ctx, pool); err != nil && ctx.Err() == nil {
			logger.Warn("demo: mirror orders", slog.Any("error", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (m *mirror) copyOrders(ctx context.Context, pool *pgxpool.Pool) error {
	for {
		m.mu.Lock()
		after := m.lastOrder
		m.mu.Unlock()
		rows, err := demodb.New(pool).OrdersAfter(ctx, demodb.OrdersAfterParams{After: after, MaxRows: 1000})
		if err != nil {
			return fmt.Errorf("read orders after %d: %w", after, err)
		}
		for _, o := range rows {
			m.order(o.ID, o.Customer, o.AmountCents)
		}
		if len(rows) == 0 {
			return nil
		}
	}
}

// Drift is what the panel injects into the external system.
type Drift struct {
	Drop, Alter, Add, LoseDeliveries int
}

// inject applies d at random positions among what is mirrored so far.
func (m *mirror) inject(d Drift) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.orders == nil {
		return
	}
	if m.lastOrder > 0 {
		for range d.Drop {
			m.orders.Drop(strconv.FormatInt(1+rand.Int64N(m.lastOrder), 10))
		}
		for range d.Alter {
			m.orders.Alter(strconv.FormatInt(1+rand.Int64N(m.lastOrder), 10), "amount_cents", rand.IntN(100))
		}
	}
	for range d.Add {
		m.added++
		m.orders.Put(strconv.Itoa(1_000_000_000+m.added), map[string]any{"customer": "mallory", "amount_cents": 1})
	}
	for i := 0; i < d.LoseDeliveries && len(m.delivered) > 0; i++ {
		j := rand.IntN(len(m.delivered))
		m.hooks.Drop(m.delivered[j])
		delete(m.listed, m.delivered[j])
		m.delivered = append(m.delivered[:j], m.delivered[j+1:]...)
	}
}

// setDown takes both providers down (every lookup answers 503) or up.
func (m *mirror) setDown(down bool) {
	if orders, hooks := m.providers(); orders != nil {
		orders.SetDown(down)
		hooks.SetDown(down)
	}
}

// writeChecks points the demo's two checks at the providers, creating
// them on the first run, sets their interval, and makes both due now.
func (m *mirror) writeChecks(ctx context.Context, pool *pgxpool.Pool, interval time.Duration) error {
	q := queries.New(pool)
	orders, hooks := m.providers()
	for _, c := range []queries.ReconcileCheckUpsertParams{
		{Name: OrdersCheck, Kind: reconcile.KindTable, RemoteUrl: orders.URL(), Destination: Destination, Topic: "order.state",
			TableSchema: "switchyard_demo", TableName: "orders", KeyColumn: "id", Columns: []string{"customer", "amount_cents"}},
		{Name: DeliveriesCheck, Kind: reconcile.KindDelivery, RemoteUrl: hooks.URL(), Destination: Destination, Columns: []string{}},
	} {
		c.BatchSize, c.RemoteRate, c.TimeoutMs, c.IntervalMs = 500, 50, 2000, interval.Milliseconds()
		c.WindowMs, c.LeaseMs = 24*3600*1000, 30_000
		if err := q.ReconcileCheckUpsert(ctx, c); err != nil {
			return fmt.Errorf("write check %s: %w", c.Name, err)
		}
	}
	return nil
}
