package switchyard_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard"
)

// The examples run against a database of their own (TestMain sets
// DATABASE_URL), migrated as the console migrates it.

// Enqueue an event in the same transaction as the business change it
// announces: both commit, or neither does. The payload is delivered
// byte for byte as given.
func ExampleEnqueue() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	// Once, when the service is set up: its table and a destination.
	_, err = pool.Exec(ctx, `
		CREATE TABLE orders (id bigint PRIMARY KEY, total numeric NOT NULL);
		INSERT INTO switchyard.destinations (name, kind, address, secret_ref)
		VALUES ('billing', 'webhook', 'https://billing.invalid/hooks', 'BILLING_WEBHOOK_SECRET')`)
	if err != nil {
		panic(err)
	}

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO orders (id, total) VALUES (42, 19.90)`); err != nil {
			return err
		}
		_, err := switchyard.Enqueue(ctx, tx, switchyard.Message{
			Topic:         "order.created",
			Destination:   "billing",
			AggregateType: "order", AggregateID: "42", // in order with order 42's other events
			Payload: []byte(`{"order_id": 42, "total": 19.90, "ref": 12345678901234567890}`),
		})
		return err
	})
	if err != nil {
		panic(err)
	}

	var topic, payload string
	err = pool.QueryRow(ctx, `SELECT topic, payload::text FROM switchyard.outbox WHERE destination = 'billing'`).Scan(&topic, &payload)
	if err != nil {
		panic(err)
	}
	fmt.Println(topic, payload)
	// Output: order.created {"order_id": 42, "total": 19.90, "ref": 12345678901234567890}
}

// EnqueueMany writes a batch in one call; a large one goes through COPY.
func ExampleEnqueueMany() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind, address) VALUES ('search-index', 'webhook', 'https://search.invalid/hooks')`)
	if err != nil {
		panic(err)
	}

	msgs := make([]switchyard.Message, 500)
	for i := range msgs {
		msgs[i] = switchyard.Message{
			Topic: "product.updated", Destination: "search-index",
			Payload: fmt.Appendf(nil, `{"product_id": %d}`, i),
		}
	}
	var ids []uuid.UUID
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		ids, err = switchyard.EnqueueMany(ctx, tx, msgs)
		return err
	})
	if err != nil {
		panic(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox WHERE destination = 'search-index'`).Scan(&n); err != nil {
		panic(err)
	}
	fmt.Println(len(ids), "ids,", n, "messages")
	// Output: 500 ids, 500 messages
}

// Receive applies an inbound event once: the handler's writes and the
// record of the event commit in one transaction, so a redelivery finds
// the event and does nothing.
func ExampleReceive() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE payments (order_id bigint PRIMARY KEY, paid_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		panic(err)
	}

	markPaid := func(ctx context.Context, tx pgx.Tx, ev switchyard.Event) error {
		_, err := tx.Exec(ctx, `INSERT INTO payments (order_id) SELECT ($1::json->>'order_id')::bigint`, ev.Payload)
		return err
	}
	ev := switchyard.Event{Source: "payments", ID: "evt_1", Payload: []byte(`{"order_id": 42}`)}
	for range 2 { // the sender delivers it twice
		res, err := switchyard.Receive(ctx, pool, ev, markPaid)
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Outcome)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&n); err != nil {
		panic(err)
	}
	fmt.Println(n, "payment")
	// Output:
	// processed
	// duplicate
	// 1 payment
}

// Run runs the console, the dispatcher and the inbox receiver inside the
// program, with the program's own inbox handlers. Here a signed webhook
// arrives at POST /inbox/crm, the program's handler takes it and, in the
// same transaction, enqueues a message that the dispatcher delivers to a
// webhook receiver.
func ExampleRun() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	delivered := make(chan []byte, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		delivered <- body
	}))
	defer receiver.Close()
	// Configuration: an inbox source whose events the program's handler
	// "crm-contacts" takes, and a destination for what it sends on. The
	// secrets stay in the environment; the rows name them.
	_, err = pool.Exec(ctx, `
		INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler)
		VALUES ('crm', 'standard-webhooks', '{CRM_SECRET}', 'crm-contacts')`)
	if err != nil {
		panic(err)
	}
	_, err = pool.Exec(ctx, `
		INSERT INTO switchyard.destinations (name, kind, address, secret_ref, retry_base_ms, retry_cap_ms)
		VALUES ('mailer', 'webhook', $1, 'MAILER_SECRET', 100, 1000)`, receiver.URL)
	if err != nil {
		panic(err)
	}
	const crmSecret = "whsec_dGhlLWNybS1zaWducy13aXRoLXRoaXMta2V5LW9mLTMy"
	dataDir, err := os.MkdirTemp("", "switchyard-example-") // the audit checkpoints go there
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dataDir)
	env := map[string]string{
		"DATABASE_URL": os.Getenv("DATABASE_URL"), "SWITCHYARD_DATA": dataDir,
		"CRM_SECRET": crmSecret, "MAILER_SECRET": "whsec_bWFpbGVyLXZlcmlmaWVzLXdpdGgtdGhpcy1rZXk=",
	}

	handlers := switchyard.Handlers{}.Handle("crm-contacts", func(ctx context.Context, tx pgx.Tx, ev switchyard.Event) error {
		fmt.Println("received", ev.Source, ev.ID)
		_, err := switchyard.Enqueue(ctx, tx, switchyard.Message{Topic: "contact.welcome", Destination: "mailer", Payload: ev.Payload})
		return err
	})
	started := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- switchyard.Run(ctx, switchyard.Config{
			Args:     []string{"serve", "--listen", "127.0.0.1:0", "--workers", "1", "--log-level", "error"},
			Getenv:   func(k string) string { return env[k] },
			Handlers: handlers,
			Started:  func(url string) { started <- url },
		})
	}()
	var url string
	select {
	case url = <-started:
	case err := <-done:
		panic(err)
	}

	// What the CRM sends: a Standard Webhooks request.
	body := []byte(`{"type": "contact.created", "email": "ada@example.com"}`)
	req, _ := http.NewRequest(http.MethodPost, url+"/inbox/crm", bytes.NewReader(body))
	if err := switchyard.SignWebhook(req.Header, crmSecret, "msg_1", body); err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("inbox answered", resp.StatusCode)
	select {
	case got := <-delivered:
		fmt.Println("mailer got", string(got))
	case <-time.After(20 * time.Second):
		fmt.Println("nothing delivered")
	}

	stop()
	if err := <-done; err != nil {
		panic(err)
	}
	// Output:
	// received crm msg_1
	// inbox answered 200
	// mailer got {"type": "contact.created", "email": "ada@example.com"}
}
