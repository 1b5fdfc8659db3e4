package ws

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/triage"
)

// A client that stops reading while one item changes many times, and
// says hello (a resync) now and then meanwhile, ends with the item's
// newest state once it reads again: the socket's writer blocks on the
// full connection, the changes coalesce per item behind it, and no
// coalescing, hello or wake-up loses the newest version or leaves an
// older one as the last word (the page applies only newer versions).
func TestSlowReaderEndsWithTheNewestState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A blocked write must outlast the test's changes: the writer waits
	// on the full connection all the while the client does not read.
	e := setup(t, Config{WriteTimeout: time.Minute})
	// A state of some 4 KiB (its ref is padded): two of them fill the
	// connection.
	ref := json.RawMessage(`{"check": "drift", "pad": "` + strings.Repeat("x", 4<<10) + `"}`)
	require.NoError(t, pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		return triage.Track(ctx, tx, triage.ReconcileFindings, ref, "drift", "test")
	}))
	items, err := triage.List(ctx, e.pool, triage.Filter{})
	require.NoError(t, err)
	require.Len(t, items, 1)
	it := items[0]
	op := e.signIn(t, "alice", auth.Operator)
	watcher := e.signIn(t, "bob", auth.Operator)

	c := e.dialSmallBuffers(t, watcher)
	hello := map[string]any{"type": "hello", "view": "item", "items": []int64{it.ID}}
	sendRaw(t, c, hello)
	first := readState(t, c, it.ID, it.Version)
	require.Equal(t, it.Version, first.Version)

	// Another client, which reads, shows when a change has been fanned
	// out (offered to every socket of the item, the slow one included).
	observer := e.dial(t, e.signIn(t, "carol", auth.Operator))
	observer.send(hello)
	observer.await(5*time.Second, "the item's state", func(m message) bool { return m.Type == "state" })

	// The slow client reads nothing now. Each change is committed and
	// fanned out before the next; in the first half, after every fifth
	// one, the slow client says hello again. The second half reaches it
	// through the fan-out alone (a hello handled after the last change
	// would read the newest state itself, and hide a push that was lost).
	statuses := []triage.Status{triage.Acknowledged, triage.Investigating, triage.Open}
	const changes = 40
	version := it.Version
	var last triage.Item
	for i := range changes {
		a, err := e.srv.cfg.Engine.Mutate(ctx, op.Principal, triage.Input{MutationID: uuid.New(), ItemID: it.ID,
			Op: triage.OpStatus, Args: triage.Args{Status: statuses[i%len(statuses)]}, SeenVersion: version})
		require.NoError(t, err)
		require.True(t, a.OK, "change %d: %s %s", i, a.Reason, a.Message)
		last, version = *a.Item, a.Item.Version
		observer.await(30*time.Second, "the change fanned out", func(m message) bool {
			return m.Type == "state" && len(m.Items) == 1 && m.Items[0].Version >= version
		})
		if i%5 == 4 && i < changes/2 {
			sendRaw(t, c, hello)
		}
	}
	got := readState(t, c, it.ID, last.Version)
	require.Equal(t, last.Version, got.Version)
	require.Equal(t, last.Status, got.Status)
}

// dialSmallBuffers dials as s over a connection whose kernel buffers are
// as small as the kernel allows at both ends, so that a client that does
// not read soon blocks the server's writes. The test's HTTP server is
// one of its own, with the same handler.
func (e *env) dialSmallBuffers(t *testing.T, s auth.Session) *websocket.Conn {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(e.serve))
	srv.Config.ConnState = func(conn net.Conn, state http.ConnState) {
		if tc, ok := conn.(*net.TCPConn); ok && state == http.StateNew {
			_ = tc.SetWriteBuffer(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(e.srv.Stop) // runs first: its sockets close before the HTTP server
	small := &net.Dialer{Control: func(_, _ string, raw syscall.RawConn) error {
		var err error
		if cerr := raw.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	h := http.Header{}
	h.Set("Cookie", "session="+s.Token)
	h.Set("Origin", srv.URL)
	dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", &websocket.DialOptions{
		HTTPHeader: h, HTTPClient: &http.Client{Transport: &http.Transport{DialContext: small.DialContext}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func sendRaw(t *testing.T, c *websocket.Conn, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, c.Write(wctx, websocket.MessageText, b))
}

// readState reads c until a state of item at version want or newer, as
// the page holds it (the newest version seen; older ones are ignored),
// and returns it; it fails the test after 30 s, naming the newest version
// that came.
func readState(t *testing.T, c *websocket.Conn, item, want int64) triage.Item {
	t.Helper()
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var held triage.Item
	states := 0
	for held.Version < want {
		_, data, err := c.Read(rctx)
		require.NoError(t, err, "waiting for version %d of item %d; the client holds version %d after %d states", want, item, held.Version, states)
		var m message
		require.NoError(t, json.Unmarshal(data, &m))
		if m.Type != "state" {
			continue
		}
		states++
		for _, s := range m.Items {
			if s.ID == item && s.Version > held.Version {
				held = s
			}
		}
	}
	t.Logf("version %d of item %d came in %d state messages", held.Version, item, states)
	return held
}
