package bench

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/destination/webhook"
)

// The bench's receiver answers 204 to every delivery signed with its
// secret, over one kept-alive connection, and 401, with the reason, to one
// signed with another.
func TestBenchReceiverVerifiesEverySignature(t *testing.T) {
	secret, err := newWebhookSecret()
	require.NoError(t, err)
	r, err := startBenchReceiver(secret, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(r.close)

	good, err := webhook.New(webhook.Config{URL: r.url, Secret: secret})
	require.NoError(t, err)
	t.Cleanup(good.CloseIdleConnections)
	for i := range 20 {
		out, err := good.Deliver(t.Context(), destination.Delivery{
			MessageID: "msg_" + strings.Repeat("a", i), Payload: []byte(`{"n":` + strings.Repeat("1", i+1) + `}`),
		})
		require.NoError(t, err, "delivery %d", i)
		require.Equal(t, http.StatusNoContent, out.StatusCode)
	}
	r.mu.Lock()
	conns := len(r.conns)
	r.mu.Unlock()
	require.Equal(t, 1, conns, "deliveries one after another reuse one connection")

	other, err := newWebhookSecret()
	require.NoError(t, err)
	bad, err := webhook.New(webhook.Config{URL: r.url, Secret: other})
	require.NoError(t, err)
	t.Cleanup(bad.CloseIdleConnections)
	out, err := bad.Deliver(t.Context(), destination.Delivery{MessageID: "msg_bad", Payload: []byte(`{}`)})
	require.ErrorContains(t, err, "HTTP 401")
	require.Equal(t, http.StatusUnauthorized, out.StatusCode)
	require.Contains(t, out.Response, "no matching signature")
}

// A body over the limit gets 400 and the connection closes, since the rest
// of it is never read; close then returns with nothing left open.
func TestBenchReceiverRefusesATooLargeBodyAndCloses(t *testing.T) {
	secret, err := newWebhookSecret()
	require.NoError(t, err)
	r, err := startBenchReceiver(secret, slog.New(slog.DiscardHandler))
	require.NoError(t, err)

	conn, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", r.ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(conn, "POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n{")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "body too large", string(body))
	require.True(t, resp.Close, "the receiver closes a connection whose body it did not read")

	done := make(chan struct{})
	go func() { r.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return")
	}
	_, err = (&net.Dialer{}).DialContext(context.Background(), "tcp", r.ln.Addr().String())
	require.Error(t, err, "a closed receiver accepts nothing")
}
