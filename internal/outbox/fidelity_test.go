package outbox

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination/webhook"
	"github.com/switchyard/switchyard/internal/testwait"
)

// fidelityPayloads are valid JSON that a jsonb column would rewrite: keys
// out of jsonb's order, spacing and newlines, numbers beyond float64 and
// with trailing zeros, a duplicate key, escapes (an escaped backslash
// before u0000 too).
var fidelityPayloads = []string{
	`{"z": 1, "a": 2, "mm": 3}`,
	"{\n  \"order_id\" : 42 ,\t\"lines\":[ 1,2 ,3 ]\n}",
	`{"big": 12345678901234567890123, "price": 19.90, "exp": 1E+2, "neg": -0.0}`,
	`{"k": 1, "k": 2}`,
	`{"text": "caf\u00e9 \ud83d\ude00 \"quoted\" \\u0000 end"}`,
	`[3, 2, 1]`,
	`"just a string"`,
}

// webhookReceiver records the bodies of requests whose Standard Webhooks
// signature verifies under secret, by webhook-id.
type webhookReceiver struct {
	mu     sync.Mutex
	bodies map[string][]byte // guarded by mu
	bad    int               // guarded by mu: requests that did not verify
}

func (r *webhookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request, secret string) {
	body, err := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || webhook.Verify(secret, req.Header, body, time.Minute, time.Now()) != nil {
		r.bad++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.bodies[req.Header.Get("webhook-id")] = body
}

func (r *webhookReceiver) received() (map[string][]byte, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]byte, len(r.bodies))
	for k, v := range r.bodies {
		out[k] = v
	}
	return out, r.bad
}

// Issue 13, item 6: a payload is delivered as the bytes that were
// enqueued, whichever way it was enqueued: one INSERT per message, COPY
// for a large batch, or a service's own SQL. The signature verifies over
// those bytes.
func TestPayloadIsDeliveredByteForByte(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "exact")
	const secret = "whsec_ZmlkZWxpdHktdGVzdC1zaWduaW5nLWtleS0zMmI="
	recv := &webhookReceiver{bodies: map[string][]byte{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { recv.ServeHTTP(w, req, secret) }))
	t.Cleanup(srv.Close)
	dest, err := webhook.New(webhook.Config{URL: srv.URL, Secret: secret})
	require.NoError(t, err)

	want := map[string][]byte{}
	// One INSERT per message (a small batch).
	var small []Message
	for _, p := range fidelityPayloads {
		small = append(small, Message{ID: uuid.New(), Topic: "t", Destination: "exact", Payload: []byte(p),
			Headers: map[string]string{"X-Z": "1", "X-A": "2"}})
	}
	enqueue(t, pool, small...)
	// COPY (a batch at the threshold or above).
	var large []Message
	for i := range copyThreshold {
		p := fidelityPayloads[i%len(fidelityPayloads)]
		large = append(large, Message{ID: uuid.New(), Topic: "t", Destination: "exact", Payload: []byte(p)})
	}
	enqueue(t, pool, large...)
	for _, m := range append(small, large...) {
		want[m.ID.String()] = m.Payload
	}
	// A service's own INSERT, with the payload as a text literal.
	for _, p := range fidelityPayloads {
		var id uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload, headers)
			VALUES ('t', 'exact', $1::text::json, '{"X-Trace": "abc"}') RETURNING message_id`, p).Scan(&id))
		want[id.String()] = []byte(p)
	}

	startDispatcher(t, pool, Config{Workers: 2, Routes: map[string]Route{"exact": {Destination: dest, Retry: fastRetry(3)}}})
	testwait.Until(t, time.Minute, "every message to be delivered", func() bool {
		return countWhere(t, pool, "state = 'delivered'") == len(want)
	})
	got, bad := recv.received()
	require.Zero(t, bad, "requests whose signature did not verify")
	require.Len(t, got, len(want))
	for id, body := range want {
		require.Truef(t, bytes.Equal(body, got[id]), "message %s: enqueued %q, delivered %q", id, body, got[id])
	}
	// A filter on a payload field still works on the json column.
	withOrder := 0
	for _, body := range want {
		if bytes.Contains(body, []byte(`"order_id" : 42`)) {
			withOrder++
		}
	}
	require.Equal(t, withOrder, countWhere(t, pool, `json_typeof(payload) = 'object' AND payload->>'order_id' = '42'`))
}

// A \u0000 escape stays refused, as jsonb refused it: every ->> on its row
// would fail, and with it every filter on a payload field. Enqueue says so
// without aborting the caller's transaction; the column's CHECK refuses a
// service's own INSERT.
func TestPayloadWithNULEscapeIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "exact")
	nul := []byte(`{"a": {"b": ["x\u0000y"]}}`)
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := Enqueue(ctx, tx, Message{Topic: "t", Destination: "exact", Payload: nul})
		require.ErrorIs(t, err, ErrInvalid)
		_, err = Enqueue(ctx, tx, Message{Topic: "t", Destination: "exact", Payload: []byte(`{"a": "x\\u0000y"}`)})
		return err // the transaction is still usable
	})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO switchyard.outbox (topic, destination, payload) VALUES ('t', 'exact', $1::text::json)`, string(nul))
	require.ErrorContains(t, err, "Unicode escape")
	require.Equal(t, 1, countWhere(t, pool, "payload->>'a' = 'x\\u0000y'"))
}
