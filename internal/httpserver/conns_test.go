package httpserver_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/testwait"
)

// dialFrom opens a connection to addr from the loopback address from
// (127.0.0.0/8 is all loopback on Linux: each stands for another client).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// closedWithin reports whether the server closed conn (a read returning
// EOF or a reset) within limit.
func closedWithin(conn net.Conn, limit time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(limit))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// refusals counts the listener's "too many open" records: a connection
// closed by the cap, told apart from one cut at a deadline without
// depending on how fast the test ran.
type refusals struct {
	slog.Handler
	n atomic.Int64
}

func (r *refusals) Enabled(context.Context, slog.Level) bool { return true }

func (r *refusals) Handle(ctx context.Context, rec slog.Record) error {
	if strings.HasPrefix(rec.Message, "connection refused: too many open") {
		r.n.Add(1)
	}
	return nil
}

func (r *refusals) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *refusals) WithGroup(string) slog.Handler      { return r }

// Slow clients cannot hold the server: bodies announced and never sent and
// responses never read are cut at the read and write deadlines, /healthz
// answers throughout, a
// live stream outlives the deadlines, and the goroutines return to where
// they were. (Not parallel: it counts the process's goroutines.)
func TestSlowClientsAreCutAndHealthzAnswers(t *testing.T) {
	e, err := httpserver.New(httpserver.Config{
		Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(),
		Streaming: func(c echo.Context) bool { return c.Path() == "/stream" },
	})
	require.NoError(t, err)
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.POST("/form", func(c echo.Context) error { return c.String(http.StatusOK, c.FormValue("name")) })
	big := make(chan error, 100)
	e.GET("/big", func(c echo.Context) error {
		_, err := c.Response().Write(make([]byte, 32<<20))
		big <- err
		return nil
	})
	more := make(chan struct{})
	e.GET("/stream", func(c echo.Context) error {
		rc := http.NewResponseController(c.Response())
		for _, ev := range []string{"first", "second"} {
			if ev == "second" {
				<-more
			}
			_ = rc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := fmt.Fprintf(c.Response(), "data: %s\n\n", ev); err != nil {
				return err
			}
			if err := rc.Flush(); err != nil {
				return err
			}
		}
		return nil
	})
	// The bounds below (15 s) are far above the deadline: they prove a cut
	// happens rather than never, also on a loaded machine running -race.
	const deadline = 3 * time.Second
	addr := serve(t, e, httpserver.ServeConfig{
		Timeouts: httpserver.Timeouts{ReadHeader: deadline, Read: deadline, Write: deadline, Idle: deadline},
		Conns:    httpserver.ConnLimits{PerAddress: 20, Total: 100},
		Logger:   slog.New(slog.DiscardHandler),
	})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 15 * time.Second}
	healthz := func() {
		resp, err := client.Get("http://" + addr + "/healthz")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	healthz()
	baseline := runtime.NumGoroutine()

	// Not the client above: its Timeout covers reading the whole body,
	// and the stream must stay open for the whole test.
	streams := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	stream, err := streams.Get("http://" + addr + "/stream")
	require.NoError(t, err)
	events := bufio.NewReader(stream.Body)
	line, err := events.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "data: first\n", line)
	_, err = events.ReadString('\n') // the event's blank line
	require.NoError(t, err)

	// One client: its cap of stalled bodies, then more that are closed at once.
	var stalled []net.Conn
	for range 20 {
		conn := dialFrom(t, "127.0.0.2", addr)
		_, err := fmt.Fprintf(conn, "POST /form HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nname=")
		require.NoError(t, err)
		stalled = append(stalled, conn)
	}
	// Another: responses never read.
	var unread []net.Conn
	for range 10 {
		conn := dialFrom(t, "127.0.0.3", addr)
		_, err := fmt.Fprintf(conn, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		unread = append(unread, conn)
	}
	healthz()

	start := time.Now()
	for _, conn := range stalled {
		require.True(t, closedWithin(conn, 15*time.Second), "a stalled body is cut")
	}
	for range unread {
		select {
		case err := <-big:
			require.Error(t, err, "an unread response's write fails at the deadline")
		case <-time.After(15 * time.Second):
			t.Fatal("a response nobody reads still holds its handler")
		}
	}
	require.Less(t, time.Since(start), 15*time.Second)
	healthz()

	// The stream outlived every deadline.
	close(more)
	line, err = events.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "data: second\n", line)
	stream.Body.Close()

	for _, conn := range append(stalled, unread...) {
		conn.Close()
	}
	waitUntil(t, 15*time.Second, func() bool { return runtime.NumGoroutine() <= baseline }, func() string {
		buf := make([]byte, 1<<20)
		return fmt.Sprintf("goroutines: %d, baseline %d\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
	})
}

// Connections over a client's cap are closed at once, while that client's
// other connections and other clients are served. The deadlines here are
// long, so that no connection is cut by one however slowly the test runs:
// every close is the cap's (the listener logs each refusal).
func TestConnectionsOverAClientsCapAreRefused(t *testing.T) {
	t.Parallel()
	e, err := httpserver.New(httpserver.Config{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	const long = time.Minute
	refused := &refusals{Handler: slog.DiscardHandler}
	addr := serve(t, e, httpserver.ServeConfig{
		Timeouts: httpserver.Timeouts{ReadHeader: long, Read: long, Write: long, Idle: long},
		Conns:    httpserver.ConnLimits{PerAddress: 5, Total: 100},
		Logger:   slog.New(refused),
	})
	var held []net.Conn
	for range 5 {
		conn := dialFrom(t, "127.0.0.2", addr)
		_, err := fmt.Fprintf(conn, "POST /form HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
		require.NoError(t, err)
		held = append(held, conn)
	}
	for range 3 {
		excess := dialFrom(t, "127.0.0.2", addr)
		require.True(t, closedWithin(excess, 10*time.Second), "a connection over the cap is closed")
	}
	testwait.Until(t, 10*time.Second, "the listener to log 3 refusals", func() bool { return refused.n.Load() == 3 })
	for _, conn := range held {
		require.False(t, closedWithin(conn, 50*time.Millisecond), "a connection under the cap stays open")
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.4")}}).DialContext}}
	resp, err := client.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "another client is served")
	require.EqualValues(t, 3, refused.n.Load(), "nothing else was refused")
}

// waitUntil polls cond until it holds, failing with why() after limit.
func waitUntil(t *testing.T, limit time.Duration, cond func() bool, why func() string) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(limit)
	for !cond() {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatal(why())
		}
	}
}
