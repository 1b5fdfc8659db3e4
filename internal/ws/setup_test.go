package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/triage"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const password = "correct horse battery"

// env is one console instance's triage sockets on a real database: the
// change feed, the session guard, an auth service, and an HTTP server
// whose /ws authenticates the "session" cookie as the console does.
type env struct {
	pool     *pgxpool.Pool
	auth     *auth.Service
	srv      *Server
	http     *httptest.Server
	presence *triage.Presence
}

func setup(t *testing.T, cfg Config) *env {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.New(t)
	listener := changefeed.NewListener(pool, changefeed.Config{})
	require.NoError(t, listener.Start(ctx))
	t.Cleanup(listener.Stop)
	svc := auth.New(pool, auth.Config{Params: auth.Params{Time: 1, MemoryKiB: 8 * 1024, Threads: 1, KeyLen: 32}, Notify: listener.Wake})
	guard := auth.NewStreamGuard()
	_, unwatch := listener.Subscribe(guard.Observe)
	t.Cleanup(unwatch)

	e := &env{pool: pool, auth: svc}
	if cfg.Presence == nil {
		cfg.Presence = &triage.Presence{Pool: pool, Instance: "test", Notify: listener.Wake}
	}
	e.presence = cfg.Presence
	cfg.Engine = &triage.Engine{Pool: pool, Notify: listener.Wake}
	cfg.Streams = guard
	e.srv = New(cfg)
	require.NoError(t, e.srv.Start(ctx))
	_, unsubscribe := listener.Subscribe(e.srv.Observe)
	t.Cleanup(unsubscribe)
	e.http = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.http.Close)
	t.Cleanup(e.srv.Stop) // runs first: sockets close before the HTTP server
	return e
}

func (e *env) serve(w http.ResponseWriter, r *http.Request) {
	authenticate := func(ctx context.Context) (auth.Principal, error) {
		cookie, err := r.Cookie("session")
		if err != nil {
			return auth.Principal{}, auth.ErrNoSession
		}
		return e.auth.Authenticate(ctx, cookie.Value)
	}
	p, err := authenticate(r.Context())
	if err != nil {
		http.Error(w, "sign in", http.StatusUnauthorized)
		return
	}
	e.srv.Serve(w, r, p, "127.0.0.1", authenticate)
}

// signIn creates an account with role and returns its session.
func (e *env) signIn(t *testing.T, name string, role auth.Role) auth.Session {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, e.auth.AddUser(ctx, auth.CLI, name, role, password))
	s, err := e.auth.Login(ctx, name, password, "127.0.0.1")
	require.NoError(t, err)
	return s
}

// dial opens a socket as session s with the page's own Origin.
func (e *env) dial(t *testing.T, s auth.Session) *client {
	t.Helper()
	c, resp, err := e.dialOrigin(s, e.http.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	return newClient(t, c)
}

func (e *env) dialOrigin(s auth.Session, origin string) (*websocket.Conn, *http.Response, error) {
	return e.dialWith(s, origin, &websocket.DialOptions{})
}

// dialWith dials as session s from origin with opts (its HTTPHeader is
// set here).
func (e *env) dialWith(s auth.Session, origin string, opts *websocket.DialOptions) (*websocket.Conn, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h := http.Header{}
	h.Set("Cookie", "session="+s.Token)
	h.Set("Origin", origin)
	opts.HTTPHeader = h
	return websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.http.URL, "http")+"/ws", opts)
}

// client is a test's end of a socket. It reads all the time, as a
// browser does, so that it answers the server's pings however long the
// test takes before it looks at the messages: a client that stopped
// reading would rightly be dropped as a dead peer.
type client struct {
	t    *testing.T
	ws   *websocket.Conn
	more chan struct{} // cap 1: queue or err changed

	mu    sync.Mutex
	queue [][]byte // guarded by mu: messages read, not yet looked at
	err   error    // guarded by mu: why reading ended
}

func newClient(t *testing.T, ws *websocket.Conn) *client {
	c := &client{t: t, ws: ws, more: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.readAll()
	}()
	t.Cleanup(func() {
		c.ws.CloseNow()
		<-done
	})
	return c
}

func (c *client) readAll() {
	for {
		_, data, err := c.ws.Read(context.Background())
		c.mu.Lock()
		if err != nil {
			c.err = err
		} else {
			c.queue = append(c.queue, data)
		}
		c.mu.Unlock()
		select {
		case c.more <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// errStillOpen: no message came, and the socket is still open.
var errStillOpen = errors.New("nothing came, the socket is still open")

// next returns the next message, or the error that ended reading, or
// errStillOpen once deadline fires.
func (c *client) next(deadline <-chan time.Time) ([]byte, error) {
	for {
		c.mu.Lock()
		if len(c.queue) > 0 {
			data := c.queue[0]
			c.queue = c.queue[1:]
			c.mu.Unlock()
			return data, nil
		}
		err := c.err
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-c.more:
		case <-deadline:
			return nil, errStillOpen
		}
	}
}

func (c *client) send(v any) {
	c.t.Helper()
	require.NoError(c.t, c.sendErr(v))
}

// sendErr is send for a goroutine other than the test's.
func (c *client) sendErr(v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.ws.Write(ctx, websocket.MessageText, b)
}

// message is any server message, decoded loosely.
type message struct {
	Type   string              `json:"type"`
	Items  []triage.Item       `json:"items"`
	Views  map[string][]string `json:"views"`
	Answer triage.Answer       `json:"answer"`
	OK     bool                `json:"ok"`
}

// await reads messages until match accepts one, or fails the test after
// limit.
func (c *client) await(limit time.Duration, what string, match func(message) bool) message {
	c.t.Helper()
	m, err := c.awaitErr(limit, what, match)
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

// awaitErr is await for a goroutine other than the test's (which must
// not fail the test): it returns the failure, naming the messages that
// came meanwhile.
func (c *client) awaitErr(limit time.Duration, what string, match func(message) bool) (message, error) {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	var seen []string
	for {
		data, err := c.next(deadline.C)
		if err != nil {
			return message{}, fmt.Errorf("waiting %v for %s (came meanwhile: %v): %w", limit, what, seen, err)
		}
		var m message
		if err := json.Unmarshal(data, &m); err != nil {
			return message{}, fmt.Errorf("waiting for %s: %w", what, err)
		}
		if match(m) {
			return m, nil
		}
		seen = append(seen, m.Type)
	}
}

// closeStatus reads until the socket closes and returns its close code,
// failing the test if that takes longer than limit.
func (c *client) closeStatus(limit time.Duration) websocket.StatusCode {
	c.t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		_, err := c.next(deadline.C)
		if err == nil {
			continue
		}
		if errors.Is(err, errStillOpen) {
			c.t.Fatalf("the socket was still open after %v", limit)
		}
		return websocket.CloseStatus(err)
	}
}
