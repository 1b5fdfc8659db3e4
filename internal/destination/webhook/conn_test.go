package webhook_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/destination/webhook"
	"github.com/switchyard/switchyard/internal/testwait"
)

// rawServer accepts connections on 127.0.0.1 and hands each, with a
// reader over it, to handle in a goroutine of its own; it counts them.
type rawServer struct {
	url      string
	ln       net.Listener
	accepted atomic.Int64
}

func newRawServer(t *testing.T, handle func(conn net.Conn, r *bufio.Reader)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &rawServer{url: "http://" + ln.Addr().String() + "/hook", ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			wg.Go(func() {
				defer func() { _ = conn.Close() }()
				handle(conn, bufio.NewReader(conn))
			})
		}
	})
	return s
}

// readRequest reads one request and its body; nil when the client closed
// the connection.
func readRequest(t *testing.T, r *bufio.Reader) *http.Request {
	req, err := http.ReadRequest(r)
	if err != nil {
		return nil
	}
	body, err := io.ReadAll(req.Body)
	assert.NoError(t, err)
	req.Body = io.NopCloser(strings.NewReader(string(body)))
	return req
}

// TestDeliverRetriesOnceOnAConnectionTheReceiverClosed: a receiver that
// closes its keep-alive connection after each answer, as many do after a
// few idle seconds, costs the next delivery a second try on a new
// connection, not a failure.
func TestDeliverRetriesOnceOnAConnectionTheReceiverClosed(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{}, 4)
	srv := newRawServer(t, func(conn net.Conn, r *bufio.Reader) {
		if readRequest(t, r) == nil {
			return
		}
		// Keep-alive promised, then the connection closed anyway.
		_, _ = io.WriteString(conn, "HTTP/1.1 204 No Content\r\n\r\n")
		_ = conn.Close()
		closed <- struct{}{}
	})
	d := newDest(t, srv.url, nil)

	for i := range 3 {
		_, err := d.Deliver(t.Context(), delivery(fmt.Sprintf("msg_%d", i)))
		require.NoError(t, err, "delivery %d", i)
		testwait.For(t, 5*time.Second, "the receiver's close", closed)
	}
	assert.Equal(t, int64(3), srv.accepted.Load())

	// Once: where the new connection cannot be opened, the delivery fails.
	require.NoError(t, srv.ln.Close())
	_, err := d.Deliver(t.Context(), delivery("msg_last"))
	require.ErrorContains(t, err, "connection refused")
	assert.False(t, destination.IsPermanent(err))
}

// TestDeliverChecksAConnectionIdleForASecond: a connection idle for more
// than a second is looked at before it is used, and one the receiver has
// shut is not sent on: the receiver here still reads what is sent, and
// gets each message once.
func TestDeliverChecksAConnectionIdleForASecond(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	shut := make(chan struct{}, 2)
	srv := newRawServer(t, func(conn net.Conn, r *bufio.Reader) {
		if readRequest(t, r) == nil {
			return
		}
		requests.Add(1)
		_, _ = io.WriteString(conn, "HTTP/1.1 204 No Content\r\n\r\n")
		_ = conn.(*net.TCPConn).CloseWrite()
		shut <- struct{}{}
		for readRequest(t, r) != nil {
			requests.Add(1) // sent on a connection already shut: never answered
		}
	})
	d := newDest(t, srv.url, nil)

	_, err := d.Deliver(t.Context(), delivery("msg_1"))
	require.NoError(t, err)
	testwait.For(t, 5*time.Second, "the receiver's shutdown", shut)
	time.Sleep(1100 * time.Millisecond) // past the check's second
	_, err = d.Deliver(t.Context(), delivery("msg_2"))
	require.NoError(t, err)
	testwait.For(t, 5*time.Second, "the receiver's shutdown", shut)

	assert.Equal(t, int64(2), srv.accepted.Load())
	assert.Equal(t, int64(2), requests.Load(), "requests the receiver read")
}

// TestDeliverReadsEachAnswerOnItsOwnConnection: many deliveries at once
// over kept connections, the answers framed every way HTTP/1.1 allows
// (a length, chunks, a body larger than a delivery reads, no body, an
// early hint first, a close), each get their own answer: a connection is
// reused only after its answer was read to its end.
func TestDeliverReadsEachAnswerOnItsOwnConnection(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("b", 200<<10)
	var requests atomic.Int64
	srv := newRawServer(t, func(conn net.Conn, r *bufio.Reader) {
		w := bufio.NewWriter(conn)
		closing := false
		for {
			req := readRequest(t, r)
			if req == nil {
				return
			}
			if requests.Add(1); closing {
				continue // sent after "Connection: close": never answered
			}
			id := req.Header.Get("webhook-id")
			var n int
			_, _ = fmt.Sscanf(id, "msg_%d", &n)
			status := map[bool]int{true: 200, false: 503}[n%2 == 0]
			text := http.StatusText(status)
			switch n % 6 {
			case 0, 1:
				fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Length: %d\r\n\r\n%s", status, text, len(id), id)
			case 2, 3:
				fmt.Fprintf(w, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n")
				fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n3\r\n...\r\n0\r\n\r\n", status, text, len(id), id)
			case 4:
				fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Length: %d\r\n\r\n%s%s", status, text, len(id)+len(big), id, big)
			case 5:
				fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", status, text, len(id), id)
				_ = w.Flush()
				_ = conn.(*net.TCPConn).CloseWrite()
				closing = true
				continue
			}
			if w.Flush() != nil {
				return
			}
		}
	})
	const deliveries, senders = 300, 8
	d := newDest(t, srv.url, func(c *webhook.Config) { c.Connections = senders })

	var wg sync.WaitGroup
	var next atomic.Int64
	for range senders {
		wg.Go(func() {
			for n := next.Add(1); n <= deliveries; n = next.Add(1) {
				id := fmt.Sprintf("msg_%d", n)
				want := map[int64]string{2: id + "...", 3: id + "...", 4: (id + big)[:destination.MaxResponseBytes]}[n%6]
				out, err := d.Deliver(t.Context(), delivery(id))
				if n%2 == 0 {
					assert.NoError(t, err, id)
					assert.Equal(t, 200, out.StatusCode, id)
				} else {
					assert.ErrorContains(t, err, "HTTP 503: "+id, id)
					assert.Equal(t, 503, out.StatusCode, id)
				}
				if want == "" {
					want = id
				}
				assert.Equal(t, want, out.Response)
			}
		})
	}
	wg.Wait()
	// The connections closed by their answer or cut short by their body
	// (a third of the deliveries) were not kept, every other one was.
	assert.GreaterOrEqual(t, srv.accepted.Load(), int64(deliveries/3))
	assert.LessOrEqual(t, srv.accepted.Load(), int64(deliveries/3+senders))
	assert.Equal(t, int64(deliveries), requests.Load(), "requests the receiver read")
}

// TestDeliverDropsAConnectionWithAnUnaskedAnswer: a receiver that sends
// a second answer after the first (a fault, or a proxy's) costs its
// connection: the next delivery does not read it as its own.
func TestDeliverDropsAConnectionWithAnUnaskedAnswer(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, func(conn net.Conn, r *bufio.Reader) {
		for readRequest(t, r) != nil {
			// Both in one write: they arrive together.
			_, _ = io.WriteString(conn, "HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
		}
	})
	d := newDest(t, srv.url, nil)

	for i := range 3 {
		out, err := d.Deliver(t.Context(), delivery(fmt.Sprintf("msg_%d", i)))
		require.NoError(t, err, "delivery %d", i)
		assert.Equal(t, http.StatusNoContent, out.StatusCode)
	}
	assert.Equal(t, int64(3), srv.accepted.Load())
}

// TestDeliverRefusesAnswerHeadersPast64KiB: a receiver that sends
// headers without end costs one retryable error, not the process's
// memory.
func TestDeliverRefusesAnswerHeadersPast64KiB(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, func(conn net.Conn, r *bufio.Reader) {
		if readRequest(t, r) == nil {
			return
		}
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\n")
		line := "X-Pad: " + strings.Repeat("p", 1000) + "\r\n"
		for range 1000 {
			if _, err := io.WriteString(conn, line); err != nil {
				return
			}
		}
	})
	d := newDest(t, srv.url, nil)

	_, err := d.Deliver(t.Context(), delivery("msg_1"))
	require.ErrorContains(t, err, "response too large")
	assert.False(t, destination.IsPermanent(err))
}

// TestDeliverOverTLS: an https receiver is reached with the roots it is
// given, and refused, retryably, without them.
func TestDeliverOverTLS(t *testing.T) {
	t.Parallel()
	rec := newRecorder(http.StatusNoContent, "")
	srv := httptest.NewTLSServer(rec)
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	d := newDest(t, srv.URL+"/hook", func(c *webhook.Config) { c.TLS = &tls.Config{RootCAs: roots} })

	for i := range 2 {
		_, err := d.Deliver(t.Context(), delivery(fmt.Sprintf("msg_%d", i)))
		require.NoError(t, err)
		got := rec.next(t)
		require.NoError(t, webhook.Verify(secretA, got.header, got.body, time.Minute, time.Now()))
	}

	untrusted := newDest(t, srv.URL+"/hook", nil)
	_, err := untrusted.Deliver(t.Context(), delivery("msg_x"))
	require.ErrorContains(t, err, "certificate")
	assert.False(t, destination.IsPermanent(err))
	assert.Empty(t, rec.got)
}

// TestDeliverSendsTheURLsUserinfoAsBasicAuth, as net/http's client does,
// unless the message sets Authorization itself.
func TestDeliverSendsTheURLsUserinfoAsBasicAuth(t *testing.T) {
	t.Parallel()
	rec := newRecorder(http.StatusOK, "")
	srv := serve(t, rec)
	d := newDest(t, strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1)+"/hook?token=t", nil)

	_, err := d.Deliver(t.Context(), delivery("msg_1"))
	require.NoError(t, err)
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:hunter2"))
	assert.Equal(t, want, rec.next(t).header.Get("Authorization"))

	m := delivery("msg_2")
	m.Headers = map[string]string{"authorization": "Bearer own"}
	_, err = d.Deliver(t.Context(), m)
	require.NoError(t, err)
	assert.Equal(t, []string{"Bearer own"}, rec.next(t).header.Values("Authorization"))
}

// TestCloseIdleConnectionsKeepsNoneAfter: a replaced destination's idle
// connections close at once, and so does the connection of a delivery
// still made through it.
func TestCloseIdleConnectionsKeepsNoneAfter(t *testing.T) {
	t.Parallel()
	var open atomic.Int64
	srv := httptest.NewUnstartedServer(newRecorder(http.StatusNoContent, ""))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	d := newDest(t, srv.URL, nil)

	_, err := d.Deliver(t.Context(), delivery("msg_1"))
	require.NoError(t, err)
	assert.Equal(t, int64(1), open.Load(), "kept for the next delivery")
	d.CloseIdleConnections()
	testwait.Until(t, 5*time.Second, "the idle connection closed", func() bool { return open.Load() == 0 })

	_, err = d.Deliver(t.Context(), delivery("msg_2"))
	require.NoError(t, err)
	testwait.Until(t, 5*time.Second, "the delivery's connection closed", func() bool { return open.Load() == 0 })
}
