package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/demo/demodb"
	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/destination/webhook"
	"github.com/switchyard/switchyard/internal/outbox"
)

var demoCustomers = []string{"ada", "grace", "alan", "barbara", "edsger", "margaret", "ken", "radia"}

// runOrders writes orders at the configured rate until ctx ends: each
// order and its outbox event in one transaction, as a real service would.
// The external shop (mirror) is told of the orders once they commit.
func runOrders(ctx context.Context, pool *pgxpool.Pool, control *control, m *mirror, logger *slog.Logger) {
	var owed float64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		owed += control.settings().OrdersPerSecond / 10
		n := int(owed)
		owed -= float64(n)
		if n == 0 {
			continue
		}
		if err := writeOrders(ctx, pool, n, m); err != nil && ctx.Err() == nil {
			logger.Warn("demo: write orders", slog.Any("error", err))
		} else if err == nil {
			_ = outbox.Notify(ctx, pool)
		}
	}
}

// writeOrders writes n orders in one transaction and tells the shop of
// them after the commit, holding m.writing throughout: the shop answers
// no lookup in between (see mirror).
func writeOrders(ctx context.Context, pool *pgxpool.Pool, n int, m *mirror) error {
	m.writing.Lock()
	defer m.writing.Unlock()
	orders := make([]demodb.OrderInsertParams, 0, n)
	ids := make([]int64, 0, n)
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		orders, ids = orders[:0], ids[:0]
		msgs := make([]outbox.Message, 0, n)
		for range n {
			o := demodb.OrderInsertParams{Customer: demoCustomers[rand.IntN(len(demoCustomers))], AmountCents: int64(500 + rand.IntN(20000))}
			row, err := demodb.New(tx).OrderInsert(ctx, o)
			if err != nil {
				return fmt.Errorf("insert order: %w", err)
			}
			orders, ids = append(orders, o), append(ids, row.ID)
			body, _ := json.Marshal(map[string]any{"order_id": row.ID, "customer": o.Customer, "amount_cents": o.AmountCents, "created_at": row.CreatedAt})
			m := outbox.Message{Topic: "order.created", Destination: Destination, Payload: body}
			if rand.IntN(2) == 0 { // half are ordered per customer
				m.AggregateType, m.AggregateID = "customer", o.Customer
			}
			msgs = append(msgs, m)
		}
		_, err := outbox.Enqueue(ctx, tx, msgs...)
		return err
	})
	if err != nil {
		return err
	}
	for i, o := range orders {
		m.order(ids[i], o.Customer, o.AmountCents)
	}
	return nil
}

// runWebhooks sends signed customer events to the console's own inbox at
// the configured rate until ctx ends, with duplicates (the same event id
// again) and out-of-order versions (a newer version before an older one).
func runWebhooks(ctx context.Context, inboxURL, secret string, control *control, logger *slog.Logger) {
	sender, err := webhook.New(webhook.Config{URL: inboxURL, Secret: secret, Timeout: 5 * time.Second})
	if err != nil {
		logger.Error("demo: webhook sender", slog.Any("error", err))
		return
	}
	versions := map[string]int64{}
	var owed float64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		owed += control.settings().InboxPerSecond / 10
		for ; owed >= 1 && ctx.Err() == nil; owed-- {
			for _, ev := range nextCustomerEvents(versions) {
				if _, err := sender.Deliver(ctx, ev); err != nil && ctx.Err() == nil {
					logger.Debug("demo: webhook refused", slog.Any("error", err))
				}
			}
		}
	}
}

// nextCustomerEvents makes the next event of a random customer, sometimes
// with a duplicate delivery, sometimes with its successor sent first.
func nextCustomerEvents(versions map[string]int64) []destination.Delivery {
	id := demoCustomers[rand.IntN(len(demoCustomers))]
	event := func() destination.Delivery {
		versions[id]++
		v := versions[id]
		body, _ := json.Marshal(map[string]any{
			"customer": map[string]string{"id": "cus_" + id, "name": id, "email": id + "@example.com"},
			"version":  v,
		})
		return destination.Delivery{MessageID: "evt_" + uuid.NewString(), Topic: "customer.updated", Payload: body, Attempt: 1, EnqueuedAt: time.Now()}
	}
	first := event()
	switch r := rand.IntN(100); {
	case r < 15:
		return []destination.Delivery{first, first} // a duplicate delivery
	case r < 25:
		second := event()
		return []destination.Delivery{second, first} // out of order
	}
	return []destination.Delivery{first}
}
