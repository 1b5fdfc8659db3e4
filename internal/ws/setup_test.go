package ws

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
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
	t.Cleanup(func() { c.CloseNow() })
	return &client{t: t, ws: c}
}

func (e *env) dialOrigin(s auth.Session, origin string) (*websocket.Conn, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h := http.Header{}
	h.Set("Cookie", "session="+s.Token)
	h.Set("Origin", origin)
	return websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.http.URL, "http")+"/ws", &websocket.DialOptions{HTTPHeader: h})
}

// client is a test's end of a socket.
type client struct {
	t  *testing.T
	ws *websocket.Conn
}

func (c *client) send(v any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := json.Marshal(v)
	require.NoError(c.t, err)
	require.NoError(c.t, c.ws.Write(ctx, websocket.MessageText, b))
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
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			c.t.Fatalf("waiting for %s: %v", what, err)
		}
		var m message
		require.NoError(c.t, json.Unmarshal(data, &m))
		if match(m) {
			return m
		}
	}
}

// closeStatus reads until the socket closes and returns its close code,
// failing the test if that takes longer than limit.
func (c *client) closeStatus(limit time.Duration) websocket.StatusCode {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		_, _, err := c.ws.Read(ctx)
		if err == nil {
			continue
		}
		if errors.Is(err, context.DeadlineExceeded) {
			c.t.Fatalf("the socket was still open after %v", limit)
		}
		return websocket.CloseStatus(err)
	}
}
