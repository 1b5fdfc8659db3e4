package console_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/destination/webhook"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/testwait"
	"github.com/switchyard/switchyard/web/static"
)

const (
	shopSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	shopOldSecret = "whsec_AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="
	paySecret     = "whsec_pay_test"
)

type inboxBundle struct {
	e       *echo.Echo
	pool    *pgxpool.Pool
	reg     *prometheus.Registry
	changed *atomic.Int64 // failures announced to the change feed's listeners
}

// setupInbox wires the console with two sources: "shop" (Standard
// Webhooks, rotating from shopOldSecret to shopSecret) and "pay" (Stripe).
// Their handler writes one row to effects per applied event, and panics on
// a payload with "panic": true.
func setupInbox(t *testing.T) inboxBundle {
	t.Helper()
	pool := dbtest.New(t)
	_, err := pool.Exec(context.Background(), `CREATE TABLE effects (event_id text NOT NULL)`)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	registry := prometheus.NewRegistry()
	handlers := inbox.Registry{"effect": {Handle: func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
		if bytes.Contains(ev.Payload, []byte(`"panic": true`)) {
			panic("test handler panics")
		}
		if bytes.Contains(ev.Payload, []byte(`"fail": "dirty"`)) {
			return errors.New("refused \x00 with \xff in it")
		}
		if bytes.Contains(ev.Payload, []byte(`"store": "nul"`)) {
			_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1)`, "a\x00b")
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1)`, ev.ID)
		return err
	}}}
	shop, err := inbox.NewVerifier(inbox.SchemeStandardWebhooks, []string{shopSecret, shopOldSecret}, 0)
	require.NoError(t, err)
	pay, err := inbox.NewVerifier(inbox.SchemeStripe, []string{paySecret}, 0)
	require.NoError(t, err)
	changed := new(atomic.Int64)
	receiver := inbox.NewReceiver(inbox.ReceiverConfig{
		Pool: pool, Handlers: handlers, Metrics: inbox.NewMetrics(registry), Changed: func() { changed.Add(1) },
		Sources: []inbox.Source{
			{Name: "shop", Scheme: inbox.SchemeStandardWebhooks, Verifier: shop, Handler: "effect"},
			{Name: "pay", Scheme: inbox.SchemeStripe, Verifier: pay, Handler: "effect"},
			{Name: "broken", Scheme: inbox.SchemeStripe, Verifier: pay, Handler: "nobody"},
		},
	})
	assets, err := static.New()
	require.NoError(t, err)
	h := console.New(console.Deps{Logger: logger, Assets: assets, Gatherer: registry, Inbox: receiver,
		Readiness: console.DatabaseReadiness{Pool: pool}})
	e, err := httpserver.New(httpserver.Config{Logger: logger, Registerer: registry, RenderError: h.RenderError, BodyLimit: h.BodyLimit, Streaming: console.Streaming})
	require.NoError(t, err)
	h.Register(e)
	return inboxBundle{e: e, pool: pool, reg: registry, changed: changed}
}

// shopHeaders signs body the Standard Webhooks way with the given secrets.
func shopHeaders(t *testing.T, id string, ts time.Time, body []byte, secrets ...string) http.Header {
	t.Helper()
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	var sigs []string
	for _, s := range secrets {
		sig, err := webhook.Sign(s, id, ts, body)
		require.NoError(t, err)
		sigs = append(sigs, sig)
	}
	h.Set("webhook-signature", strings.Join(sigs, " "))
	return h
}

func payHeaders(ts time.Time, body []byte) http.Header {
	h := http.Header{}
	h.Set("Stripe-Signature", "t="+strconv.FormatInt(ts.Unix(), 10)+",v1="+hex.EncodeToString(inbox.StripeSignature(paySecret, ts.Unix(), body)))
	return h
}

func (b inboxBundle) post(t *testing.T, source string, headers http.Header, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/inbox/"+source, bytes.NewReader(body))
	for k, v := range headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, req)
	return rec
}

func (b inboxBundle) count(t *testing.T, query string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), query).Scan(&n))
	return n
}

func TestInboxSignatureVectorsOverHTTP(t *testing.T) {
	t.Parallel()
	b := setupInbox(t)
	now := time.Now()
	body := []byte(`{"type":"order.paid","order":42}`)
	changed := []byte(`{"type":"order.paid","order":43}`)
	cases := []struct {
		name    string
		id      string
		headers http.Header
		body    []byte
		want    int
		effects int
	}{
		{"valid", "msg_1", shopHeaders(t, "msg_1", now, body, shopSecret), body, 200, 1},
		{"body changed by one byte", "msg_2", shopHeaders(t, "msg_2", now, body, shopSecret), changed, 401, 1},
		{"timestamp 301 s old", "msg_3", shopHeaders(t, "msg_3", now.Add(-301*time.Second), body, shopSecret), body, 401, 1},
		{"rotation: two signatures, one valid", "msg_4", shopHeaders(t, "msg_4", now, body, "whsec_c29tZXRoaW5nIGVsc2U=", shopSecret), body, 200, 2},
		{"rotation: the old secret", "msg_5", shopHeaders(t, "msg_5", now, body, shopOldSecret), body, 200, 3},
		{"missing header", "msg_6", http.Header{}, body, 401, 3},
		{"valid signature replayed with the same id", "msg_1", shopHeaders(t, "msg_1", now, body, shopSecret), body, 200, 3},
	}
	for _, tc := range cases {
		rec := b.post(t, "shop", tc.headers, tc.body)
		require.Equal(t, tc.want, rec.Code, "%s: %s", tc.name, rec.Body)
		if tc.want == 401 { // the reason is logged and counted, never sent
			require.JSONEq(t, `{"error":"missing or invalid signature, or timestamp outside the tolerance"}`, rec.Body.String(), tc.name)
		}
		require.Equal(t, tc.effects, b.count(t, `SELECT count(*) FROM effects`), tc.name)
	}
	require.Equal(t, 3, b.count(t, `SELECT count(*) FROM switchyard.inbox_events`), "refused requests store nothing")

	// Stripe: the event id is the payload's id.
	stripeBody := []byte(`{"id":"evt_1","type":"charge.succeeded"}`)
	require.Equal(t, 200, b.post(t, "pay", payHeaders(now, stripeBody), stripeBody).Code)
	require.Equal(t, 200, b.post(t, "pay", payHeaders(now.Add(time.Second), stripeBody), stripeBody).Code, "a duplicate gets the same 2xx")
	require.Equal(t, 401, b.post(t, "pay", payHeaders(now.Add(-301*time.Second), stripeBody), stripeBody).Code)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM effects WHERE event_id = 'evt_1'`))

	metrics := b.scrape(t)
	for _, reason := range []string{"missing_header", "no_match", "timestamp_skew"} {
		require.Contains(t, metrics, `switchyard_inbox_signature_failures_total{reason="`+reason+`",source="shop"} 1`)
	}
	require.Contains(t, metrics, `switchyard_inbox_signature_failures_total{reason="timestamp_skew",source="pay"} 1`)
	require.Contains(t, metrics, `switchyard_inbox_signature_failures_total{reason="bad_format",source="shop"} 0`)
	require.Contains(t, metrics, `switchyard_inbox_duplicates_total{source="shop"} 1`)
	require.Contains(t, metrics, `switchyard_inbox_received_total{source="pay"} 2`)
	require.NotContains(t, metrics, `source="nope"`)
}

func (b inboxBundle) scrape(t *testing.T) string {
	t.Helper()
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, 200, rec.Code)
	return rec.Body.String()
}

func TestInboxRefusalsStoreNothing(t *testing.T) {
	t.Parallel()
	b := setupInbox(t)
	now := time.Now()
	big := []byte(`{"pad":"` + strings.Repeat("x", console.DefaultInboxMaxBody) + `"}`)
	malformed := []byte(`{"order": 42`)
	notObject := []byte(`[1, 2]`)
	noID := []byte(`{"type":"x"}`)
	cases := []struct {
		name, source string
		headers      http.Header
		body         []byte
		want         int
	}{
		{"oversize body", "shop", shopHeaders(t, "m1", now, big, shopSecret), big, 413},
		{"malformed JSON", "shop", shopHeaders(t, "m2", now, malformed, shopSecret), malformed, 400},
		{"not an object", "shop", shopHeaders(t, "m3", now, notObject, shopSecret), notObject, 400},
		{"stripe event without id", "pay", payHeaders(now, noID), noID, 400},
		{"unknown source", "nope", shopHeaders(t, "m4", now, noID, shopSecret), noID, 404},
		{"misconfigured source", "broken", payHeaders(now, noID), noID, 503},
	}
	for _, tc := range cases {
		rec := b.post(t, tc.source, tc.headers, tc.body)
		require.Equal(t, tc.want, rec.Code, "%s: %s", tc.name, rec.Body)
		require.Equal(t, "application/json", strings.Split(rec.Header().Get("Content-Type"), ";")[0], tc.name)
		require.Equal(t, 0, b.count(t, `SELECT count(*) FROM switchyard.inbox_events`), tc.name)
		require.Equal(t, 0, b.count(t, `SELECT count(*) FROM effects`), tc.name)
	}
}

func TestInboxHandlerPanicIsRecordedAndServingGoesOn(t *testing.T) {
	t.Parallel()
	b := setupInbox(t)
	now := time.Now()
	bad := []byte(`{"panic": true}`)
	rec := b.post(t, "shop", shopHeaders(t, "boom", now, bad, shopSecret), bad)
	require.Equal(t, http.StatusInternalServerError, rec.Code, rec.Body.String())
	var status, lastError string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT status, last_error FROM switchyard.inbox_events WHERE event_id = 'boom'`).Scan(&status, &lastError))
	require.Equal(t, "failed", status)
	require.Contains(t, lastError, "test handler panics")
	var feedState string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT payload->>'state' FROM switchyard.changes WHERE kind = 'inbox_failure' AND subject = 'shop/boom'`).Scan(&feedState))
	require.Equal(t, "failed", feedState, "the failure is on the change feed")
	require.Equal(t, int64(1), b.changed.Load(), "and announced after its commit")

	good := []byte(`{"ok": true}`)
	require.Equal(t, 200, b.post(t, "shop", shopHeaders(t, "fine", now, good, shopSecret), good).Code)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM effects`))
	require.Contains(t, b.scrape(t), `switchyard_inbox_failures_total{source="shop"} 1`)
}

func TestInboxConcurrentDeliveriesOverHTTPApplyOnce(t *testing.T) {
	t.Parallel()
	b := setupInbox(t)
	body := []byte(`{"order": 7}`)
	headers := shopHeaders(t, "same", time.Now(), body, shopSecret)
	const n = 50
	codes := make(chan int, n)
	testwait.Together(n, func(int) {
		codes <- b.post(t, "shop", headers, body).Code
	})
	close(codes)
	for code := range codes {
		require.Equal(t, 200, code)
	}
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM effects`))
	require.Equal(t, n-1, b.count(t, `SELECT sum(count) FROM switchyard.inbox_duplicates WHERE source = 'shop'`))
}

// Every answer under /inbox/{source} is JSON, as docs/inbox.md promises,
// whatever the sender sent (no Content-Type, another method, another Host
// name), while the console's own inbox pages stay HTML.
func TestInboxAnswersAreAlwaysJSON(t *testing.T) {
	t.Parallel()
	b := setupInbox(t)
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	assets, err := static.New()
	require.NoError(t, err)
	h := console.New(console.Deps{Logger: logger, Assets: assets, Inbox: nil, Readiness: console.DatabaseReadiness{Pool: b.pool}})
	e, err := httpserver.New(httpserver.Config{
		Logger: logger, Registerer: prometheus.NewRegistry(), RenderError: h.RenderError, BodyLimit: h.BodyLimit,
		Streaming: console.Streaming, ForPrograms: console.ForPrograms, AllowedHosts: []string{"console.example"},
		CSRF: &httpserver.CSRFConfig{Exempt: console.CSRFExempt, Session: h.SessionToken},
	})
	require.NoError(t, err)
	h.Register(e)
	cases := []struct {
		name, method, host string
		want               int
	}{
		{"GET", http.MethodGet, "console.example", http.StatusMethodNotAllowed},
		{"PUT", http.MethodPut, "console.example", http.StatusMethodNotAllowed},
		{"DELETE", http.MethodDelete, "console.example", http.StatusMethodNotAllowed},
		{"another host name", http.MethodPost, "rebound.example", http.StatusMisdirectedRequest},
		{"POST without Content-Type", http.MethodPost, "console.example", http.StatusNotFound},
	}
	for _, tc := range cases {
		req := httptest.NewRequest(tc.method, "/inbox/shop", strings.NewReader(`{}`))
		req.Host = tc.host
		req.Header.Set("Accept", "text/html")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		require.Equal(t, tc.want, rec.Code, "%s: %s", tc.name, rec.Body)
		require.Equal(t, "application/json", strings.Split(rec.Header().Get("Content-Type"), ";")[0], tc.name)
		require.Contains(t, rec.Body.String(), `"error"`, tc.name)
		require.Equal(t, "default-src 'none'; frame-ancestors 'none'", rec.Header().Get("Content-Security-Policy"),
			"%s: an answer to a program allows nothing", tc.name)
	}
	req := httptest.NewRequest(http.MethodGet, "/inbox/events/1", nil)
	req.Host = "rebound.example"
	req.Header.Set("Accept", "text/html")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	require.Equal(t, http.StatusMisdirectedRequest, rec.Code)
	require.Equal(t, "text/html", strings.Split(rec.Header().Get("Content-Type"), ";")[0], "the console's own pages answer HTML")
	require.Contains(t, rec.Header().Get("Content-Security-Policy"), "script-src 'nonce-", "the console's own pages keep their nonce")
}

// A handler error holding a NUL and invalid UTF-8 is recorded (cleaned)
// and visible, not answered 503 forever; a handler that fails on the
// event's own data parks it at once; an event id over the documented
// maximum is a 400, stored nowhere.
func TestInboxUnstorableEventsAreRefusedOrParked(t *testing.T) {
	t.Parallel()
	b := setupInbox(t)
	now := time.Now()
	dirty := []byte(`{"fail": "dirty"}`)
	rec := b.post(t, "shop", shopHeaders(t, "dirty-1", now, dirty, shopSecret), dirty)
	require.Equal(t, http.StatusInternalServerError, rec.Code, rec.Body.String())
	var status, lastError string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT status, last_error FROM switchyard.inbox_events WHERE event_id = 'dirty-1'`).Scan(&status, &lastError))
	require.Equal(t, "failed", status)
	require.Equal(t, "refused \uFFFD with \uFFFD in it", lastError)

	nul := []byte(`{"store": "nul"}`)
	rec = b.post(t, "shop", shopHeaders(t, "nul-1", now, nul, shopSecret), nul)
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.inbox_events WHERE event_id = 'nul-1' AND status = 'parked'`))

	long := strings.Repeat("i", inbox.MaxEventIDBytes+1)
	body := []byte(`{"type":"order.paid"}`)
	rec = b.post(t, "shop", shopHeaders(t, long, now, body, shopSecret), body)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	huge := []byte(`{"id":"` + strings.Repeat("i", 3000) + `"}`)
	require.Equal(t, http.StatusBadRequest, b.post(t, "pay", payHeaders(now, huge), huge).Code)
	withNUL := []byte(`{"id":"evt\u0000x"}`)
	require.Equal(t, http.StatusBadRequest, b.post(t, "pay", payHeaders(now, withNUL), withNUL).Code)
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM switchyard.inbox_events WHERE length(event_id) > 256 OR event_id LIKE 'evt%'`))
	ok := strings.Repeat("i", inbox.MaxEventIDBytes)
	require.Equal(t, http.StatusOK, b.post(t, "shop", shopHeaders(t, ok, now, body, shopSecret), body).Code, "the maximum itself is taken")
}
