package orders_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard"
	"github.com/switchyard/switchyard/examples/orders"
)

// The secrets of this test; in production they live in the environment of
// Switchyard (all three) and of the order service (ORDERS_PAYMENTS_SECRET).
const (
	warehouseSecret = "whsec_d2FyZWhvdXNlLXNlY3JldC1mb3ItdGhlLWV4YW1wbGU="
	ordersSecret    = "whsec_b3JkZXJzLXBheW1lbnRzLXNlY3JldC1mb3ItZXhhbXBsZQ=="
	paymentsSecret  = "whsec_cGF5bWVudC1wcm92aWRlci1zZWNyZXQtZm9yLWV4YW1wbGU="
)

// TestOrderService runs the order service against a real database with
// Switchyard running in the same process: an order placed in Go and one
// placed from SQL reach the warehouse as the bytes enqueued; a payment
// posted twice to the inbox marks its order paid once, through a forward
// source and the service's handler; a payment to the sql source is
// applied by the SQL function.
//
// DATABASE_URL must name a database migrated for Switchyard: the main
// module's TestExampleOrderService runs this test with one.
func TestOrderService(t *testing.T) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: run this test through the main module's TestExampleOrderService (go test -run TestExampleOrderService . in the repository root), or point it at a migrated database")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))

	warehouse := newReceiver(warehouseSecret)
	warehouseSrv := httptest.NewServer(warehouse)
	defer warehouseSrv.Close()
	svc := &orders.Service{Pool: pool, PaymentsSecret: ordersSecret, Logger: logger}
	paymentsSrv := httptest.NewServer(svc.Payments())
	defer paymentsSrv.Close()
	psql(t, url, "-v", "warehouse_url="+warehouseSrv.URL, "-v", "payments_url="+paymentsSrv.URL, "-f", "setup.sql")

	consoleURL, stopped := runSwitchyard(ctx, t, url)

	// Two orders: one in Go, one from SQL.
	placed, err := svc.PlaceOrder(ctx, "ada", 1999)
	if err != nil {
		t.Fatal(err)
	}
	goPayload, _ := json.Marshal(placed)
	out := psql(t, url, "-At", "-v", "customer=grace", "-v", "total_cents=500", "-f", "place_order.sql")
	sqlID, sqlPayload, ok := strings.Cut(firstLine(out, "|"), "|")
	if !ok {
		t.Fatalf("place_order.sql printed %q, want order_id|payload", out)
	}
	eventually(t, "both orders to reach the warehouse", func() bool { return len(warehouse.bodies()) == 2 })
	got := warehouse.bodies()
	if !contains(got, goPayload) || !contains(got, []byte(sqlPayload)) {
		t.Fatalf("the warehouse got %q, want %q and %q byte for byte", got, goPayload, sqlPayload)
	}

	// The provider sends one payment twice (a retry after a timeout).
	pay := []byte(`{"type": "payment.succeeded", "order_id": ` + jsonInt(placed.ID) + `, "amount_cents": 1999}`)
	for range 2 {
		post(t, consoleURL+"/inbox/payments", "pay_1", pay)
	}
	eventually(t, "the payment to be delivered to the service", func() bool {
		return count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE destination = 'orders-payments' AND state = 'delivered'`) == 1
	})
	if paid := count(t, pool, `SELECT paid_cents FROM orders.orders WHERE id = $1`, placed.ID); paid != 1999 {
		t.Fatalf("order %d paid %d cents, want 1999 (once)", placed.ID, paid)
	}
	if n := count(t, pool, `SELECT count(*) FROM switchyard.outbox WHERE destination = 'orders-payments'`); n != 1 {
		t.Fatalf("%d messages forwarded for one payment sent twice, want 1", n)
	}

	// The same from SQL: the payments-sql source calls orders.apply_payment.
	post(t, consoleURL+"/inbox/payments-sql", "pay_2", []byte(`{"type": "payment.succeeded", "order_id": `+sqlID+`, "amount_cents": 500}`))
	if paid := count(t, pool, `SELECT paid_cents FROM orders.orders WHERE id = $1::bigint`, sqlID); paid != 500 {
		t.Fatalf("order %s paid %d cents, want 500", sqlID, paid)
	}

	cancel()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// runSwitchyard runs the console, the dispatcher and the inbox in this
// process until ctx ends; stopped yields Run's result.
func runSwitchyard(ctx context.Context, t *testing.T, url string) (consoleURL string, stopped <-chan error) {
	t.Helper()
	env := map[string]string{
		"DATABASE_URL": url, "SWITCHYARD_DATA": t.TempDir(),
		"WAREHOUSE_SECRET": warehouseSecret, "ORDERS_PAYMENTS_SECRET": ordersSecret, "PAYMENTS_SECRET": paymentsSecret,
	}
	started := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- switchyard.Run(ctx, switchyard.Config{
			Args:   []string{"serve", "--listen", "127.0.0.1:0", "--workers", "2", "--log-level", "warn"},
			Getenv: func(k string) string { return env[k] },
			Stdout: t.Output(), Stderr: t.Output(),
			Started: func(u string) { started <- u },
		})
	}()
	select {
	case u := <-started:
		return u, done
	case err := <-done:
		t.Fatalf("switchyard did not start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("switchyard did not start within 30 s")
	}
	return "", nil
}

// post sends a payment event as the provider does, signed, and wants 2xx.
func post(t *testing.T, url, id string, body []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := switchyard.SignWebhook(req.Header, paymentsSecret, id, body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, answer)
	}
}

// receiver is a webhook receiver that keeps the verified bodies it got,
// by delivery id.
type receiver struct {
	secret string
	mu     sync.Mutex
	got    map[string][]byte // guarded by mu
}

func newReceiver(secret string) *receiver { return &receiver{secret: secret, got: map[string][]byte{}} }

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err == nil {
		err = switchyard.VerifyWebhook(r.secret, req.Header, body)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got[req.Header.Get("webhook-id")] = body
}

func (r *receiver) bodies() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	for _, b := range r.got {
		out = append(out, b)
	}
	return out
}

// psql runs psql on url in this directory and returns its output.
func psql(t *testing.T, url string, args ...string) string {
	t.Helper()
	cmd := exec.Command(psqlPath(t), append([]string{"--no-psqlrc", "-q", "-d", url}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("psql %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// psqlPath finds psql: on PATH, else beside the PostgreSQL server.
func psqlPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("psql"); err == nil {
		return p
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if p := filepath.Join(strings.TrimSpace(string(out)), "psql"); isFile(p) {
			return p
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	if len(matches) == 0 {
		t.Fatal("psql not found: install the PostgreSQL client (apt-get install postgresql-client)")
	}
	return matches[len(matches)-1]
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func count(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually waits up to 30 s for cond, checking it every 20 ms.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func contains(bodies [][]byte, want []byte) bool {
	for _, b := range bodies {
		if bytes.Equal(b, want) {
			return true
		}
	}
	return false
}

func firstLine(s, sep string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sep) {
			return strings.TrimRight(line, "\n")
		}
	}
	return ""
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }
