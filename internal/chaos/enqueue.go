package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/outbox"
)

// chaosTable is the business table the enqueuer writes its orders to, in
// the same transaction as their messages.
const chaosTable = `CREATE TABLE IF NOT EXISTS chaos_orders (
    id uuid PRIMARY KEY,
    aggregate text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
)`

// enqueuer writes orders and their outbox messages in one transaction each,
// half of them ordered (one of aggregates aggregates), half unordered; a
// quarter of the transactions to the JetStream destination, the rest to
// the webhook. It
// records the messages of every transaction whose commit succeeded, and of
// every one whose commit's outcome is unknown (the connection broke during
// COMMIT): the checker asks the database about those.
type enqueuer struct {
	pool       *pgxpool.Pool
	webhook    string // the webhook destination
	jetstream  string // the JetStream destination
	aggregates int

	mu        sync.Mutex
	committed map[uuid.UUID]bool   // guarded by mu; true: commit acknowledged; false: unknown
	dest      map[uuid.UUID]string // guarded by mu; each message's destination
}

func newEnqueuer(pool *pgxpool.Pool, webhook, jetstream string, aggregates int) *enqueuer {
	return &enqueuer{pool: pool, webhook: webhook, jetstream: jetstream, aggregates: aggregates,
		committed: map[uuid.UUID]bool{}, dest: map[uuid.UUID]string{}}
}

// acknowledged returns the messages to destination whose commit was
// acknowledged, and those whose commit's outcome is unknown.
func (e *enqueuer) acknowledged(destination string) (sure, unknown map[uuid.UUID]bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	sure, unknown = map[uuid.UUID]bool{}, map[uuid.UUID]bool{}
	for id, ok := range e.committed {
		if e.dest[id] != destination {
			continue
		}
		if ok {
			sure[id] = true
		} else {
			unknown[id] = true
		}
	}
	return sure, unknown
}

func (e *enqueuer) run(ctx context.Context, seed uint64, interval time.Duration) {
	rnd := rand.New(rand.NewPCG(seed, 3))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		agg := ""
		if rnd.IntN(2) == 0 {
			agg = fmt.Sprintf("order-%d", rnd.IntN(e.aggregates))
		}
		dest := e.webhook
		if rnd.IntN(4) == 0 {
			dest = e.jetstream
		}
		e.one(ctx, dest, agg, 1+rnd.IntN(3))
	}
}

// one writes an order and n messages to dest in one transaction.
func (e *enqueuer) one(ctx context.Context, dest, agg string, n int) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		id := uuid.Must(uuid.NewV7())
		payload, _ := json.Marshal(map[string]string{"id": id.String(), "aggregate": agg})
		msgs[i] = outbox.Message{ID: id, Topic: "chaos.order", Destination: dest,
			AggregateType: "order", AggregateID: agg, Payload: payload}
		if agg == "" {
			msgs[i].AggregateType = ""
		}
	}
	tx, err := e.pool.Begin(qctx)
	if err != nil {
		return
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(qctx, `INSERT INTO chaos_orders (id, aggregate) VALUES ($1, $2)`, msgs[0].ID, agg); err != nil {
		return
	}
	if _, err := outbox.Enqueue(qctx, tx, msgs...); err != nil {
		return
	}
	err = tx.Commit(qctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range msgs {
		// A failed COMMIT may still have committed: the checker asks.
		e.committed[m.ID] = err == nil
		e.dest[m.ID] = dest
	}
}
