package console_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/console"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/httpserver"
	"github.com/switchyard/switchyard/internal/sse"
	"github.com/switchyard/switchyard/internal/testwait"
	"github.com/switchyard/switchyard/web/static"
)

// appName marks the connections of the console under test, so that the
// test can count them apart from its own.
const appName = "console-under-test"

// queryCounter counts every statement the console's connections run, and
// apart the commits among them.
type queryCounter struct{ n, commits atomic.Int64 }

func (q *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	q.n.Add(1)
	if strings.EqualFold(d.SQL, "commit") {
		q.commits.Add(1)
	}
	return ctx
}
func (q *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

type live struct {
	url     string // the console's base URL
	hub     *sse.Hub
	writer  *pgxpool.Pool
	console *pgxpool.Pool
	queries *queryCounter
}

// setupLive runs the console as cmd/console wires it (one listener, one
// hub) behind a real HTTP server, on a database of the test's own. The
// test writes through a pool of its own, so that only the console's
// statements are counted.
func setupLive(t *testing.T, feedCfg changefeed.Config) live {
	t.Helper()
	return setupLiveWith(t, feedCfg, sse.Config{}, nil)
}

// setupLiveWith is setupLive with the hub's settings, and wrap (if set)
// applied to the server's listener.
func setupLiveWith(t *testing.T, feedCfg changefeed.Config, hubCfg sse.Config, wrap func(net.Listener) net.Listener) live {
	t.Helper()
	url := dbtest.NewURL(t)
	writer, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(writer.Close)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	counter := &queryCounter{}
	cfg.ConnConfig.Tracer = counter
	cfg.ConnConfig.RuntimeParams["application_name"] = appName
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	listener := changefeed.NewListener(pool, feedCfg)
	require.NoError(t, listener.Start(context.Background()))
	t.Cleanup(listener.Stop)
	hub := sse.New(listener, hubCfg)

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	assets, err := static.New()
	require.NoError(t, err)
	registry := prometheus.NewRegistry()
	h := console.New(console.Deps{
		Logger: logger, Assets: assets, Gatherer: registry, Events: hub,
		Readiness: console.DatabaseReadiness{Pool: pool},
		Demo:      true, // streams to a loopback peer without a session: no query per stream
	})
	e, err := httpserver.New(httpserver.Config{Logger: logger, Registerer: registry, RenderError: h.RenderError, BodyLimit: h.BodyLimit, Streaming: console.Streaming, ForPrograms: console.ForPrograms})
	require.NoError(t, err)
	h.Register(e)
	srv := httptest.NewUnstartedServer(e)
	if wrap != nil {
		srv.Listener = wrap(srv.Listener)
	}
	srv.Start()
	t.Cleanup(func() {
		hub.Close() // streams end, so the server's Close does not wait for them
		srv.Close()
	})
	return live{url: srv.URL, hub: hub, writer: writer, console: pool, queries: counter}
}

func (l live) commit(t *testing.T, subject string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, l.writer, func(tx pgx.Tx) error {
		return changefeed.Append(ctx, tx, changefeed.Change{Kind: changefeed.KindDeadLetter, Subject: subject})
	}))
	require.NoError(t, changefeed.Notify(ctx, l.writer))
}

type event struct{ id, name, data string }

// stream is an SSE client of /events.
type stream struct {
	resp   *http.Response
	events chan event
}

func openStream(t *testing.T, url, lastEventID string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Accept-Encoding", "gzip") // must be ignored on a stream
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	// A transport of its own: the default one would decompress silently
	// and pool connections across the test's many streams.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Empty(t, resp.Header.Get("Content-Encoding"), "no gzip on streams")
	s := &stream{resp: resp, events: make(chan event, 100)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReader(resp.Body)
		var ev event
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "" && ev.name != "":
				s.events <- ev
				ev = event{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		resp.Body.Close()
		client.CloseIdleConnections()
	})
	return s
}

func (s *stream) next(t *testing.T, limit time.Duration) event {
	t.Helper()
	select {
	case ev := <-s.events:
		return ev
	case <-time.After(limit):
		t.Fatalf("no event within %v", limit)
	}
	panic("unreachable")
}

// A committed change reaches a browser's stream within seconds, and a
// browser that reconnects with Last-Event-ID gets what it missed.
func TestEventsStreamDeliversCommittedChangesAndResumes(t *testing.T) {
	t.Parallel()
	l := setupLive(t, changefeed.Config{})
	s := openStream(t, l.url, "")
	require.Equal(t, "ready", s.next(t, 5*time.Second).name)
	// A second viewer stays connected: when it has seen a change, the
	// server has it too.
	observer := openStream(t, l.url, "")
	require.Equal(t, "ready", observer.next(t, 5*time.Second).name)

	l.commit(t, "first")
	first := s.next(t, 10*time.Second)
	require.Equal(t, changefeed.KindDeadLetter, first.name)
	require.Contains(t, first.data, `"subject":"first"`)

	s.resp.Body.Close() // the connection drops
	observer.next(t, 10*time.Second)
	l.commit(t, "missed")
	require.Contains(t, observer.next(t, 10*time.Second).data, `"subject":"missed"`)
	again := openStream(t, l.url, first.id)
	missed := again.next(t, 5*time.Second)
	require.Contains(t, missed.data, `"subject":"missed"`)
	require.Equal(t, "ready", again.next(t, 5*time.Second).name)
	l.commit(t, "live")
	require.Contains(t, again.next(t, 10*time.Second).data, `"subject":"live"`)
}

// Viewers are cheap: 50 open streams share the process's one LISTEN
// connection, opening them runs no statement, and a change reaches all of
// them for a handful of statements, not one per viewer.
func TestManyViewersCostOneListenConnectionAndNoQueriesEach(t *testing.T) {
	t.Parallel()
	// No poll during the test: every statement counted is one the change
	// caused.
	l := setupLive(t, changefeed.Config{PollInterval: time.Hour, PruneInterval: -1})
	const viewers = 50
	// The listener's start: its snapshot read, LISTEN, and the catch-up
	// after connecting, which ends with its COMMIT (BEGIN, snapshot, rows
	// after the position, COMMIT: one snapshot; and the rows of the
	// transactions open at the start that have ended since, when there
	// were some: the server is shared with other tests' databases, and
	// transaction ids are the server's). Nothing runs after those until a
	// change or a poll.
	testwait.Until(t, 10*time.Second, "the listener's start", func() bool { return l.queries.commits.Load() >= 1 })
	before := l.queries.n.Load()
	require.Contains(t, []int64{6, 7}, before, "statements of the listener's start")
	var streams []*stream
	for range viewers {
		s := openStream(t, l.url, "")
		require.Equal(t, "ready", s.next(t, 5*time.Second).name)
		streams = append(streams, s)
	}
	require.Equal(t, before, l.queries.n.Load(), "opening a stream runs no statement")

	l.commit(t, "seen-by-all")
	for i, s := range streams {
		ev := s.next(t, 5*time.Second)
		require.Contains(t, ev.data, `"subject":"seen-by-all"`, "viewer %d", i)
	}
	reads := l.queries.n.Load() - before
	require.Positive(t, reads)
	require.LessOrEqual(t, reads, int64(10), "statements for one change do not grow with viewers")

	var listening, total int
	require.NoError(t, l.writer.QueryRow(context.Background(), `
		SELECT count(*) FILTER (WHERE query LIKE '%LISTEN switchyard_changes%'), count(*)
		FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, appName).Scan(&listening, &total))
	require.Equal(t, 1, listening, "one LISTEN connection for all viewers")
	require.LessOrEqual(t, total, 2, "the LISTEN connection and at most one pooled connection")
}

// The LISTEN connection is killed while changes are committed: every open
// stream still converges on the database within seconds (no poll: the
// reconnect's catch-up does it).
func TestStreamsConvergeAfterTheListenConnectionIsKilled(t *testing.T) {
	t.Parallel()
	l := setupLive(t, changefeed.Config{PollInterval: time.Hour, PruneInterval: -1})
	var streams []*stream
	for range 5 {
		s := openStream(t, l.url, "")
		require.Equal(t, "ready", s.next(t, 5*time.Second).name)
		streams = append(streams, s)
	}
	ctx := context.Background()
	var pid int32
	testwait.Until(t, 10*time.Second, "the LISTEN connection", func() bool {
		err := l.writer.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()
			AND application_name = $1 AND query LIKE '%LISTEN switchyard_changes%'`, appName).Scan(&pid)
		if err == nil {
			return true
		}
		require.ErrorIs(t, err, pgx.ErrNoRows)
		return false
	})
	var killed bool
	require.NoError(t, l.writer.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&killed))
	require.True(t, killed)
	for _, subject := range []string{"during-1", "during-2", "during-3"} {
		l.commit(t, subject)
	}
	for i, s := range streams {
		for _, want := range []string{"during-1", "during-2", "during-3"} {
			require.Contains(t, s.next(t, 10*time.Second).data, `"subject":"`+want+`"`, "stream %d", i)
		}
	}
}

// smallSendBuffers makes every accepted connection's send buffer tiny, so
// that a client that stops reading blocks the server's writes after a few
// KiB instead of megabytes.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// A browser that stops reading (its socket is full) is dropped at the
// write deadline, through the real server and echo's response writer.
func TestStuckClientIsDroppedAtTheWriteDeadline(t *testing.T) {
	t.Parallel()
	l := setupLiveWith(t, changefeed.Config{}, sse.Config{WriteTimeout: 300 * time.Millisecond},
		func(ln net.Listener) net.Listener { return smallSendBuffers{ln} })
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := dialer.Dial("tcp", strings.TrimPrefix(l.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
	require.NoError(t, err)
	waitClients(t, l.hub, 1)

	// Never read; write far more than the two buffers hold.
	pad := strings.Repeat("x", changefeed.MaxPayloadBytes-16)
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, l.writer, func(tx pgx.Tx) error {
		for range 100 {
			err := changefeed.Append(ctx, tx, changefeed.Change{Kind: "k", Payload: []byte(`{"pad":"` + pad + `"}`)})
			if err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, changefeed.Notify(ctx, l.writer))
	waitClients(t, l.hub, 0)
}

func waitClients(t *testing.T, hub *sse.Hub, n int) {
	t.Helper()
	testwait.Until(t, 10*time.Second, fmt.Sprintf("%d streams", n), func() bool { return hub.Clients() == n })
}
